//! The reload protocol: a check pass that plans every change, then the changes made in order.
//!
//! A reload runs in two passes under one lock (so that two reloads never interleave):
//!
//! 1. **Check.** Every table of the file is compared with the running primitive it
//!    configures, and every value the file changes is put to that primitive's `check_*`
//!    (a keyed limiter's class must fit the unit the limiter counts in, a key fixed at build
//!    must equal the running value). The first refusal is returned, naming its key, and
//!    nothing has been applied. The pass yields a plan: the changes, each with its old value.
//! 2. **Apply.** The plan's changes are made through the primitives' setters, those a setter
//!    can still refuse first: an override added (the override slots are checked one actor at
//!    a time, and another thread's `set_override` may take a free slot meanwhile, so a file
//!    naming more new actors than free slots gets this far). A refusal undoes the changes
//!    already made, in reverse; as only overrides come before it, no limit that tokens are
//!    counted under has been changed, and a refused reload leaves every actor's state exactly
//!    as it found it.
//!
//! Threads deciding meanwhile see each primitive change at once, but not the file change at
//! once: between two setters, one class may already run the new limit and another the old.

use super::parse::{limit_key, volume_key};
use super::rules::{rule_key, WeightChange};
use super::{KeyProblem, LimitsConfig, LimitsConfigError};
use crate::bucket::{BucketConfig, TokenBucket};
use crate::clock::Clock;
use crate::fairness::{AdaptiveQuotas, AdaptiveTotal, Quotas};
use crate::gate::{Cost, KeyKind, Limit};
use crate::limiter::{Limiter, LimiterConfigError};
use crate::quota::{Quota, RateLimit};
use std::collections::BTreeMap;

type Result<T> = std::result::Result<T, LimitsConfigError>;

/// The running primitives a reload plans against and changes, borrowed from
/// [`LiveLimits`](super::LiveLimits) (which holds them; this module never names it, so the
/// reload's two halves import one way only).
pub(super) struct Running<'a, C: Clock + 'static> {
    /// Copies of the gate's limits the rules' gates charge: a cost changes on each too.
    pub(super) subsets: &'a [std::sync::Arc<[Limit]>],
    /// The rules built for layers, if any: a rule's weights change there.
    #[cfg(feature = "tower")]
    pub(super) routes: Option<&'a super::rules::LiveRoutes<C>>,
    pub(super) limiter: Option<&'a Limiter<C>>,
    pub(super) in_flight: Option<&'a Quotas>,
    /// The same quotas' adaptive total, if they have one.
    pub(super) adaptive: Option<&'a AdaptiveQuotas<C>>,
    pub(super) volume: Option<&'a RateLimit<C>>,
    /// The bucket, and the clock it is taken with.
    pub(super) bucket: Option<(&'a TokenBucket, &'a C)>,
    /// The gate's limits, if the limiter's classes were stated as `[[admit.limit]]`: limit `i`
    /// is class `i`.
    pub(super) limits: Option<&'a [Limit]>,
    /// What the gate keys the in-flight places by.
    pub(super) in_flight_key: KeyKind,
    /// What the gate keys the volume by.
    pub(super) volume_key: KeyKind,
}

impl<C: Clock + 'static> Running<'_, C> {
    /// The check pass: every change the file makes, each already accepted by its primitive's
    /// check; or the first refusal.
    pub(super) fn plan(
        &self,
        config: &LimitsConfig,
        overrides: &BTreeMap<String, u32>,
    ) -> Result<Vec<Change>> {
        let mut plan = Vec::new();
        // The gate's plan first: its shape is fixed, and a reload only changes its numbers.
        let costs = self.plan_limits(config)?;
        let key_of = |class| match self.limits {
            Some(_) => limit_key(class),
            None => class_key(class),
        };
        match (self.limiter, &config.limiter) {
            (Some(limiter), Some(file)) => {
                if file.cap != limiter.cap() {
                    return Err(fixed("admit.limiter.cap", limiter.cap(), file.cap));
                }
                if file.classes.len() != limiter.classes() {
                    return Err(fixed(
                        "admit.limiter.class",
                        format!("{} classes", limiter.classes()),
                        format!("{} classes", file.classes.len()),
                    ));
                }
                for (class, file) in file.classes.iter().enumerate() {
                    let key = key_of(class);
                    let running = limiter.config(class);
                    // A cost and its class's burst change one after the other: the first
                    // made is the one that keeps the cost within the running burst (the new
                    // cost within the old burst, or else the new burst first).
                    let cost = costs.iter().find(|change| change.limit == class);
                    let cost_first = cost.is_none_or(|change| {
                        running.is_none_or(|old| tokens(change.new) <= old.burst())
                    });
                    if let (true, Some(change)) = (cost_first, cost) {
                        plan.push(Change::Cost(change.clone()));
                    }
                    if running != Some(file.config) {
                        limiter
                            .check_config(class, &file.config)
                            .map_err(|err| limiter_error(&key, err))?;
                        plan.push(Change::Class {
                            class,
                            key: key.clone(),
                            old: running.unwrap_or(file.config),
                            new: file.config,
                        });
                    }
                    if let (false, Some(change)) = (cost_first, cost) {
                        plan.push(Change::Cost(change.clone()));
                    }
                    if limiter.is_shadow(class) != Some(file.shadow) {
                        plan.push(Change::ClassShadow {
                            class,
                            key,
                            new: file.shadow,
                        });
                    }
                }
            }
            (running, file) => absent_or_extra("admit.limiter", running.is_some(), file.is_some())?,
        }
        match (self.in_flight, &config.in_flight) {
            (Some(quotas), Some(file)) => {
                if file.key != self.in_flight_key {
                    return Err(plan_fixed(
                        "admit.in_flight.key",
                        key_name(self.in_flight_key),
                        key_name(file.key),
                    ));
                }
                if file.actors != quotas.actors() {
                    return Err(fixed(
                        "admit.in_flight.actors",
                        quotas.actors(),
                        file.actors,
                    ));
                }
                if file.override_capacity != quotas.override_capacity() {
                    return Err(fixed(
                        "admit.in_flight.override_capacity",
                        quotas.override_capacity(),
                        file.override_capacity,
                    ));
                }
                if quotas.quota() != file.quota {
                    quotas.check_quota(file.quota).map_err(|err| {
                        LimitsConfigError::at("admit.in_flight.quota", KeyProblem::InFlight(err))
                    })?;
                    plan.push(Change::InFlightQuota {
                        old: quotas.quota(),
                        new: file.quota,
                    });
                }
                for (actor, limit) in &file.overrides {
                    let old = overrides.get(actor).copied();
                    if old != Some(*limit) {
                        // Each override alone; a file adding more actors than the free slots
                        // is refused by a setter below, and the reload undone.
                        quotas
                            .check_override(actor.as_str(), Some(*limit))
                            .map_err(|err| {
                                LimitsConfigError::at(
                                    override_key(actor),
                                    KeyProblem::InFlight(err),
                                )
                            })?;
                        plan.push(Change::Override {
                            actor: actor.clone(),
                            old,
                            new: Some(*limit),
                        });
                    }
                }
                for (actor, limit) in overrides {
                    if !file.overrides.contains_key(actor) {
                        plan.push(Change::Override {
                            actor: actor.clone(),
                            old: Some(*limit),
                            new: None,
                        });
                    }
                }
                if quotas.is_shadow() != file.shadow {
                    plan.push(Change::InFlightShadow { new: file.shadow });
                }
                match (self.adaptive, file.total) {
                    (Some(adaptive), Some(new)) => {
                        let old = adaptive.settings();
                        // `initial` is read at build only: L keeps its value.
                        let new = new.initial(old.initial_limit());
                        if old != new {
                            plan.push(Change::InFlightTotal { old, new });
                        }
                    }
                    (None, None) => {}
                    (running, file) => {
                        let said = |on: bool| if on { "a table" } else { "none" };
                        return Err(fixed(
                            "admit.in_flight.total",
                            said(running.is_some()),
                            said(file.is_some()),
                        ));
                    }
                }
            }
            (running, file) => {
                absent_or_extra("admit.in_flight", running.is_some(), file.is_some())?
            }
        }
        match (self.volume, &config.volume) {
            (Some(volume), Some(file)) => {
                if file.key != self.volume_key {
                    return Err(plan_fixed(
                        "admit.volume.key",
                        key_name(self.volume_key),
                        key_name(file.key),
                    ));
                }
                let running = volume.quota();
                if running != file.quota {
                    volume.check_limits(&file.quota).map_err(volume_error)?;
                    plan.push(Change::Volume {
                        old: running,
                        new: file.quota,
                    });
                }
                if volume.is_shadow() != file.shadow {
                    plan.push(Change::VolumeShadow { new: file.shadow });
                }
            }
            (running, file) => absent_or_extra("admit.volume", running.is_some(), file.is_some())?,
        }
        match (self.bucket, &config.bucket) {
            (Some((bucket, _)), Some(file)) => {
                let running = bucket.config();
                if running != file.config {
                    bucket.check_config(&file.config).map_err(|err| {
                        LimitsConfigError::at("admit.bucket", KeyProblem::Bucket(err))
                    })?;
                    plan.push(Change::Bucket {
                        old: running,
                        new: file.config,
                    });
                }
                if bucket.is_shadow() != file.shadow {
                    plan.push(Change::BucketShadow { new: file.shadow });
                }
            }
            (running, file) => absent_or_extra("admit.bucket", running.is_some(), file.is_some())?,
        }
        Ok(plan)
    }

    /// The gate's limits: the file must state the running ones, in order, with the same names
    /// and keys. Their cost changes, each already within its new burst (the file was checked
    /// whole when it was read).
    fn plan_limits(&self, config: &LimitsConfig) -> Result<Vec<CostChange>> {
        let count = |n: usize| format!("{n} [[admit.limit]]");
        let running = match (self.limits, config.limits.is_empty()) {
            (None, true) => return Ok(Vec::new()),
            (Some(running), false) => running,
            (None, false) if self.limiter.is_none() => {
                return Err(LimitsConfigError::at("admit.limit", KeyProblem::NotRunning))
            }
            (None, false) => {
                return Err(plan_fixed(
                    "admit.limit",
                    "no [[admit.limit]] (the limiter's classes)",
                    count(config.limits.len()),
                ))
            }
            (Some(running), true) => {
                return Err(plan_fixed("admit.limit", count(running.len()), "none"))
            }
        };
        if running.len() != config.limits.len() {
            return Err(plan_fixed(
                "admit.limit",
                count(running.len()),
                count(config.limits.len()),
            ));
        }
        let mut costs = Vec::new();
        for (i, (running, file)) in running.iter().zip(&config.limits).enumerate() {
            let key = limit_key(i);
            if running.name() != file.name {
                return Err(plan_fixed(
                    &format!("{key}.name"),
                    format!("{:?}", running.name()),
                    format!("{:?}", file.name),
                ));
            }
            if running.key_kind() != file.key {
                return Err(plan_fixed(
                    &format!("{key}.key"),
                    key_name(running.key_kind()),
                    key_name(file.key),
                ));
            }
            if running.is_by_outcome() != file.outcome {
                return Err(plan_fixed(
                    &format!("{key}.outcome"),
                    running.is_by_outcome(),
                    file.outcome,
                ));
            }
            if running.cost_of() != file.cost {
                costs.push(CostChange {
                    limit: i,
                    old: running.cost_of(),
                    new: file.cost,
                });
            }
        }
        Ok(costs)
    }

    /// Makes one change, to its new value or back to its old one.
    pub(super) fn make(&self, change: &Change, side: Side) -> Result<()> {
        match change {
            Change::Class {
                class,
                key,
                old,
                new,
            } => {
                if let Some(limiter) = self.limiter {
                    limiter
                        .set_config(*class, side.pick(*old, *new))
                        .map_err(|err| limiter_error(key, err))?;
                }
            }
            Change::Cost(CostChange { limit, old, new }) => {
                let cost = side.pick(*old, *new);
                if let Some(running) = self.limits.and_then(|limits| limits.get(*limit)) {
                    limit_copies(self.subsets, running.class())
                        .for_each(|copy| copy.set_cost(cost));
                    running.set_cost(cost);
                }
            }
            Change::RuleWeight(change) => {
                #[cfg(feature = "tower")]
                if let Some(routes) = self.routes {
                    routes.set_weight(change, side == Side::New);
                }
                #[cfg(not(feature = "tower"))]
                let _ = change;
            }
            Change::ClassShadow { class, new, .. } => {
                if let Some(limiter) = self.limiter {
                    // The class exists: the plan compared the class counts.
                    let _ = limiter.set_shadow(*class, side.pick(!*new, *new));
                }
            }
            Change::InFlightQuota { old, new } => {
                if let Some(quotas) = self.in_flight {
                    quotas.set_quota(side.pick(*old, *new)).map_err(|err| {
                        LimitsConfigError::at("admit.in_flight.quota", KeyProblem::InFlight(err))
                    })?;
                }
            }
            Change::Override { actor, old, new } => {
                if let Some(quotas) = self.in_flight {
                    quotas
                        .set_override(actor.as_str(), side.pick(*old, *new))
                        .map_err(|err| {
                            LimitsConfigError::at(override_key(actor), KeyProblem::InFlight(err))
                        })?;
                }
            }
            Change::InFlightShadow { new } => {
                if let Some(quotas) = self.in_flight {
                    quotas.set_shadow(side.pick(!*new, *new));
                }
            }
            Change::InFlightTotal { old, new } => {
                if let Some(adaptive) = self.adaptive {
                    // Validated when the file was read; the old settings were running.
                    adaptive.configure(side.pick(*old, *new)).map_err(|err| {
                        LimitsConfigError::at(
                            "admit.in_flight.total",
                            KeyProblem::InFlight(
                                crate::fairness::QuotasConfigError::AdaptiveTotal(err),
                            ),
                        )
                    })?;
                }
            }
            Change::Volume { old, new } => {
                if let Some(volume) = self.volume {
                    volume
                        .set_limits(side.pick(*old, *new))
                        .map_err(volume_error)?;
                }
            }
            Change::VolumeShadow { new } => {
                if let Some(volume) = self.volume {
                    volume.set_shadow(side.pick(!*new, *new));
                }
            }
            Change::Bucket { old, new } => {
                if let Some((bucket, clock)) = self.bucket {
                    bucket
                        .set_config(side.pick(*old, *new), clock)
                        .map_err(|err| {
                            LimitsConfigError::at("admit.bucket", KeyProblem::Bucket(err))
                        })?;
                }
            }
            Change::BucketShadow { new } => {
                if let Some((bucket, _)) = self.bucket {
                    bucket.set_shadow(side.pick(!*new, *new));
                }
            }
        }
        Ok(())
    }
}

/// Which value of a change to make.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Old,
    New,
}

impl Side {
    fn pick<T>(self, old: T, new: T) -> T {
        match self {
            Self::Old => old,
            Self::New => new,
        }
    }
}

/// A limit's cost a reload changes.
#[derive(Clone)]
pub(super) struct CostChange {
    limit: usize,
    old: Cost,
    new: Cost,
}

/// One value a reload changes, with the value it replaces.
pub(super) enum Change {
    Class {
        class: usize,
        /// `admit.limiter.class[i]` or `admit.limit[i]`.
        key: String,
        old: BucketConfig,
        new: BucketConfig,
    },
    Cost(CostChange),
    /// A rule's weight and its header weight's bounds.
    RuleWeight(WeightChange),
    ClassShadow {
        class: usize,
        key: String,
        new: bool,
    },
    InFlightQuota {
        old: u32,
        new: u32,
    },
    Override {
        actor: String,
        old: Option<u32>,
        new: Option<u32>,
    },
    InFlightShadow {
        new: bool,
    },
    InFlightTotal {
        old: AdaptiveTotal,
        new: AdaptiveTotal,
    },
    Volume {
        old: Quota,
        new: Quota,
    },
    VolumeShadow {
        new: bool,
    },
    Bucket {
        old: BucketConfig,
        new: BucketConfig,
    },
    BucketShadow {
        new: bool,
    },
}

impl Change {
    /// The key the change is reported under.
    /// Whether the setter may refuse this change although the check pass accepted it: an
    /// override added while another thread takes the last free slot. Every other change was
    /// checked against a value no other thread changes the acceptance of.
    pub(super) fn may_be_refused(&self) -> bool {
        matches!(self, Self::Override { new: Some(_), .. })
    }

    pub(super) fn key(&self) -> String {
        match self {
            Self::Class { key, .. } => key.clone(),
            Self::Cost(CostChange { limit, .. }) => format!("{}.cost", limit_key(*limit)),
            Self::RuleWeight(change) => match change.rule {
                Some(rule) => format!("{}.weight", rule_key(rule)),
                None => "admit.default_rule.weight".to_owned(),
            },
            Self::ClassShadow { key, .. } => format!("{key}.shadow"),
            Self::InFlightQuota { .. } => "admit.in_flight.quota".to_owned(),
            Self::Override { actor, .. } => override_key(actor),
            Self::InFlightShadow { .. } => "admit.in_flight.shadow".to_owned(),
            Self::InFlightTotal { .. } => "admit.in_flight.total".to_owned(),
            Self::Volume { .. } => "admit.volume".to_owned(),
            Self::VolumeShadow { .. } => "admit.volume.shadow".to_owned(),
            Self::Bucket { .. } => "admit.bucket".to_owned(),
            Self::BucketShadow { .. } => "admit.bucket.shadow".to_owned(),
        }
    }
}

/// A volume quota refusal, on the key it is about.
fn volume_error(err: crate::quota::RateLimitConfigError) -> LimitsConfigError {
    LimitsConfigError::at(
        format!("admit.volume.{}", volume_key(err)),
        KeyProblem::Volume(err),
    )
}

pub(super) fn class_key(class: usize) -> String {
    format!("admit.limiter.class[{class}]")
}

fn override_key(actor: &str) -> String {
    let bare = !actor.is_empty()
        && actor
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        format!("admit.in_flight.overrides.{actor}")
    } else {
        format!("admit.in_flight.overrides.{actor:?}")
    }
}

/// The copies of class `class`'s limit that rules' gates charge.
fn limit_copies(subsets: &[std::sync::Arc<[Limit]>], class: usize) -> impl Iterator<Item = &Limit> {
    subsets
        .iter()
        .flat_map(|subset| subset.iter())
        .filter(move |limit| limit.class() == class)
}

/// The tokens a cost charges at the least.
fn tokens(cost: Cost) -> u32 {
    let (Cost::Tokens(n) | Cost::Weight { min: n }) = cost;
    n
}

/// How the file writes a key kind.
fn key_name(key: KeyKind) -> &'static str {
    match key {
        KeyKind::Claim => "\"claim\"",
        KeyKind::Source => "\"source\"",
        KeyKind::SourcePrefix => "\"source-prefix\"",
    }
}

fn plan_fixed(key: &str, running: impl ToString, found: impl ToString) -> LimitsConfigError {
    LimitsConfigError::at(
        key,
        KeyProblem::PlanFixed {
            running: running.to_string(),
            found: found.to_string(),
        },
    )
}

fn fixed(key: &str, running: impl ToString, found: impl ToString) -> LimitsConfigError {
    LimitsConfigError::at(
        key,
        KeyProblem::FixedAtBuild {
            running: running.to_string(),
            found: found.to_string(),
        },
    )
}

/// A table the file and the handle disagree about: the handle runs the primitive and the file
/// leaves it out, or the reverse.
fn absent_or_extra(key: &str, running: bool, in_file: bool) -> Result<()> {
    match (running, in_file) {
        (true, false) => Err(LimitsConfigError::at(key, KeyProblem::Missing)),
        (false, true) => Err(LimitsConfigError::at(key, KeyProblem::NotRunning)),
        _ => Ok(()),
    }
}

fn limiter_error(key: &str, err: LimiterConfigError) -> LimitsConfigError {
    LimitsConfigError::at(key, KeyProblem::Limiter(err))
}

/// A limiter's build refusal, on its key: `class_key` names a class (`[[admit.limiter.class]]`
/// or `[[admit.limit]]`), `classes` the array.
pub(super) fn limiter_build_error(
    err: LimiterConfigError,
    class_key: impl Fn(usize) -> String,
    classes: &str,
) -> LimitsConfigError {
    match err {
        LimiterConfigError::ZeroCap | LimiterConfigError::CapTooLarge { .. } => {
            limiter_error("admit.limiter.cap", err)
        }
        LimiterConfigError::CoarseClassTooLong { class, .. }
        | LimiterConfigError::ClassBurstTooLarge { class, .. } => {
            limiter_error(&class_key(class), err)
        }
        _ => limiter_error(classes, err),
    }
}
