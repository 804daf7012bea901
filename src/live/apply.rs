//! [`LiveLimits`]: the running primitives, built from a limits file and reloaded from it, all of
//! the file or none of it.
//!
//! A reload runs in two passes under one lock (so that two reloads never interleave):
//!
//! 1. **Check.** Every table of the file is compared with the running primitive it
//!    configures, and every value the file changes is put to that primitive's `check_*`
//!    (a keyed limiter's class must fit the unit the limiter counts in, a key fixed at build
//!    must equal the running value). The first refusal is returned, naming its key, and
//!    nothing has been applied. The pass yields a plan: the changes, each with its old value.
//! 2. **Apply.** The plan's changes are made in order through the primitives' setters. A setter
//!    that refuses a change its check accepted (it should not) undoes the changes already made,
//!    in reverse, so that a refused reload still leaves the limits it found.
//!
//! Threads deciding meanwhile see each primitive change at once, but not the file change at
//! once: between two setters, one class may already run the new limit and another the old.

use super::parse::volume_key;
use super::{read, KeyProblem, LimitsConfig, LimitsConfigError};
use crate::bucket::{BucketConfig, TokenBucket};
use crate::clock::{Clock, RecentClock};
use crate::fairness::{Quotas, QuotasConfigError};
use crate::limiter::{Limiter, LimiterConfigError};
use crate::quota::{Quota, RateLimit};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

type Result<T> = std::result::Result<T, LimitsConfigError>;

/// The running primitives, and the limits file they are reloaded from.
///
/// Built from a file ([`LiveLimits::load`], [`LiveLimits::from_toml_str`],
/// [`LiveLimits::from_config_with_clock`]), or around primitives already running
/// ([`LiveLimits::new`] and the `with_*` methods). Each primitive is held in an [`Arc`]:
/// clone it out ([`LiveLimits::limiter`] and the like) to decide with it, and keep the
/// `LiveLimits` to reload.
///
/// ```
/// use admit::live::LiveLimits;
///
/// let live = LiveLimits::from_toml_str(
///     "[admit.in_flight]\nquota = 2\n\n[admit.bucket]\nburst = 10\nrate = \"10/s\"\n",
/// )?;
/// let quotas = live.in_flight().expect("[admit.in_flight] is given").clone();
/// let _a = quotas.try_acquire("agent")?;
/// let _b = quotas.try_acquire("agent")?;
/// assert!(quotas.try_acquire("agent").is_err());
///
/// // The incident: the agent needs room. Edit the file, reload.
/// let reloaded = live.reload_str(
///     "[admit.in_flight]\nquota = 3\n\n[admit.bucket]\nburst = 10\nrate = \"10/s\"\n",
/// )?;
/// assert_eq!(reloaded.changed(), ["admit.in_flight.quota"]);
/// assert!(quotas.try_acquire("agent").is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LiveLimits<C: Clock = RecentClock> {
    limiter: Option<Arc<Limiter<C>>>,
    in_flight: Option<Arc<Quotas>>,
    volume: Option<Arc<RateLimit<C>>>,
    bucket: Option<Arc<TokenBucket>>,
    /// The overrides the last applied file set (a reload removes those it no longer names),
    /// behind the lock that serialises reloads.
    overrides: Mutex<BTreeMap<String, u32>>,
}

/// What a successful reload changed: the keys whose values differ from the running ones.
///
/// ```
/// use admit::live::LiveLimits;
///
/// let file = "[admit.bucket]\nburst = 10\nrate = \"10/s\"\n";
/// let live = LiveLimits::from_toml_str(file)?;
/// assert!(live.reload_str(file)?.changed().is_empty(), "the same file changes nothing");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    changed: Vec<String>,
}

impl Reloaded {
    /// The full paths of the keys changed, in the order they were applied.
    pub fn changed(&self) -> &[String] {
        &self.changed
    }
}

impl fmt::Display for Reloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.changed.is_empty() {
            f.write_str("reloaded: no limit changed")
        } else {
            write!(f, "reloaded: changed {}", self.changed.join(", "))
        }
    }
}

impl LiveLimits<RecentClock> {
    /// Builds every primitive the file at `path` configures, over the default clock.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        Self::from_toml_str(&read(path.as_ref())?)
    }

    /// Builds every primitive the document's `[admit]` table configures, over the default
    /// clock.
    pub fn from_toml_str(document: &str) -> Result<Self> {
        Self::from_config_with_clock(&LimitsConfig::from_toml_str(document)?, RecentClock::new())
    }
}

impl<C: Clock> Default for LiveLimits<C> {
    fn default() -> Self {
        Self {
            limiter: None,
            in_flight: None,
            volume: None,
            bucket: None,
            overrides: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<C: Clock> fmt::Debug for LiveLimits<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveLimits")
            .field("limiter", &self.limiter.is_some())
            .field("in_flight", &self.in_flight.is_some())
            .field("volume", &self.volume.is_some())
            .field("bucket", &self.bucket.is_some())
            .finish()
    }
}

impl<C: Clock + Clone> LiveLimits<C> {
    /// Builds every primitive `config` configures, the limiter and the volume quota reading
    /// `clock`.
    pub fn from_config_with_clock(config: &LimitsConfig, clock: C) -> Result<Self> {
        let mut live = Self::new();
        if let Some(file) = &config.limiter {
            let limiter = Limiter::builder()
                .cap(file.cap)
                .build_with_clock(file.classes.iter().map(|c| c.config), clock.clone())
                .map_err(limiter_build_error)?;
            for (class, file) in file.classes.iter().enumerate() {
                limiter
                    .set_shadow(class, file.shadow)
                    .map_err(|_| LimitsConfigError::at(class_key(class), KeyProblem::Missing))?;
            }
            live.limiter = Some(Arc::new(limiter));
        }
        if let Some(file) = &config.in_flight {
            let builder = file.overrides.iter().fold(
                Quotas::builder()
                    .quota(file.quota)
                    .actors(file.actors)
                    .override_capacity(file.override_capacity),
                |b, (actor, limit)| b.override_quota(actor.as_str(), *limit),
            );
            let quotas = builder.build().map_err(|err| {
                let key = match err {
                    QuotasConfigError::ZeroQuota => "admit.in_flight.quota",
                    QuotasConfigError::TooManyOverrides { .. } => {
                        "admit.in_flight.override_capacity"
                    }
                    _ => "admit.in_flight.actors",
                };
                LimitsConfigError::at(key, KeyProblem::InFlight(err))
            })?;
            quotas.set_shadow(file.shadow);
            live.in_flight = Some(Arc::new(quotas));
            *live
                .overrides
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner) = file.overrides.clone();
        }
        if let Some(file) = &config.volume {
            let volume = RateLimit::with_clock(file.quota, clock);
            volume.set_shadow(file.shadow);
            live.volume = Some(Arc::new(volume));
        }
        if let Some(file) = &config.bucket {
            let bucket = TokenBucket::new(file.config);
            bucket.set_shadow(file.shadow);
            live.bucket = Some(Arc::new(bucket));
        }
        Ok(live)
    }
}

impl<C: Clock> LiveLimits<C> {
    /// A handle holding no primitive yet: add running ones with the `with_*` methods.
    ///
    /// ```
    /// use admit::live::LiveLimits;
    /// use admit::{BucketConfig, Limiter};
    /// use std::sync::Arc;
    ///
    /// let limiter = Arc::new(Limiter::builder().build([BucketConfig::per_second(10)?])?);
    /// let live = LiveLimits::new().with_limiter(limiter.clone());
    /// live.reload_str("[[admit.limiter.class]]\nburst = 5\nrate = \"10/s\"\n")?;
    /// assert_eq!(limiter.config(0).map(|c| c.burst()), Some(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Reloads `limiter` from `[admit.limiter]`.
    #[must_use]
    pub fn with_limiter(mut self, limiter: Arc<Limiter<C>>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// Reloads `quotas` from `[admit.in_flight]`. Overrides given to its builder are not
    /// known here: a reload sets those the file names and removes those an earlier file named.
    #[must_use]
    pub fn with_in_flight(mut self, quotas: Arc<Quotas>) -> Self {
        self.in_flight = Some(quotas);
        self
    }

    /// Reloads `volume` from `[admit.volume]`.
    #[must_use]
    pub fn with_volume(mut self, volume: Arc<RateLimit<C>>) -> Self {
        self.volume = Some(volume);
        self
    }

    /// Reloads `bucket` from `[admit.bucket]`.
    #[must_use]
    pub fn with_bucket(mut self, bucket: Arc<TokenBucket>) -> Self {
        self.bucket = Some(bucket);
        self
    }

    /// The keyed limiter, if one is held.
    pub fn limiter(&self) -> Option<&Arc<Limiter<C>>> {
        self.limiter.as_ref()
    }

    /// The in-flight quotas, if held.
    pub fn in_flight(&self) -> Option<&Arc<Quotas>> {
        self.in_flight.as_ref()
    }

    /// The volume quota, if held.
    pub fn volume(&self) -> Option<&Arc<RateLimit<C>>> {
        self.volume.as_ref()
    }

    /// The token bucket, if held.
    pub fn bucket(&self) -> Option<&Arc<TokenBucket>> {
        self.bucket.as_ref()
    }

    /// Reads the file at `path` and applies it: all of it, or, if any key is wrong, none of it
    /// (the error names the key). A file that cannot be read is
    /// [`LimitsConfigError::Read`], naming the path.
    pub fn reload(&self, path: impl AsRef<Path>) -> Result<Reloaded> {
        self.reload_str(&read(path.as_ref())?)
    }

    /// Parses `document` and applies its `[admit]` table, all of it or none of it.
    pub fn reload_str(&self, document: &str) -> Result<Reloaded> {
        self.reload_config(&LimitsConfig::from_toml_str(document)?)
    }

    /// Applies `config`, all of it or none of it: every table must match a held primitive (a
    /// reload neither adds nor removes one), every key fixed at build must equal the running
    /// value, and every changed value must be accepted by its primitive, before anything is
    /// changed.
    pub fn reload_config(&self, config: &LimitsConfig) -> Result<Reloaded> {
        let mut overrides = self
            .overrides
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let plan = self.plan(config, &overrides)?;
        for (done, change) in plan.iter().enumerate() {
            if let Err(err) = self.make(change, Side::New) {
                for undo in plan.iter().take(done).rev() {
                    // The old values were running a moment ago: restoring them cannot be
                    // refused, and if it were there would be nothing better to do.
                    let _ = self.make(undo, Side::Old);
                }
                return Err(err);
            }
        }
        if let Some(file) = &config.in_flight {
            *overrides = file.overrides.clone();
        }
        Ok(Reloaded {
            changed: plan.iter().map(Change::key).collect(),
        })
    }

    /// The check pass: every change the file makes, each already accepted by its primitive's
    /// check; or the first refusal.
    fn plan(
        &self,
        config: &LimitsConfig,
        overrides: &BTreeMap<String, u32>,
    ) -> Result<Vec<Change>> {
        let mut plan = Vec::new();
        match (&self.limiter, &config.limiter) {
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
                    let key = class_key(class);
                    let running = limiter.config(class);
                    if running != Some(file.config) {
                        limiter
                            .check_config(class, &file.config)
                            .map_err(|err| limiter_error(&key, err))?;
                        plan.push(Change::Class {
                            class,
                            old: running.unwrap_or(file.config),
                            new: file.config,
                        });
                    }
                    if limiter.is_shadow(class) != Some(file.shadow) {
                        plan.push(Change::ClassShadow {
                            class,
                            new: file.shadow,
                        });
                    }
                }
            }
            (running, file) => absent_or_extra("admit.limiter", running.is_some(), file.is_some())?,
        }
        match (&self.in_flight, &config.in_flight) {
            (Some(quotas), Some(file)) => {
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
            }
            (running, file) => {
                absent_or_extra("admit.in_flight", running.is_some(), file.is_some())?
            }
        }
        match (&self.volume, &config.volume) {
            (Some(volume), Some(file)) => {
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
        match (&self.bucket, &config.bucket) {
            (Some(bucket), Some(file)) => {
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

    /// Makes one change, to its new value or back to its old one.
    fn make(&self, change: &Change, side: Side) -> Result<()> {
        match change {
            Change::Class { class, old, new } => {
                if let Some(limiter) = &self.limiter {
                    limiter
                        .set_config(*class, side.pick(*old, *new))
                        .map_err(|err| limiter_error(&class_key(*class), err))?;
                }
            }
            Change::ClassShadow { class, new } => {
                if let Some(limiter) = &self.limiter {
                    // The class exists: the plan compared the class counts.
                    let _ = limiter.set_shadow(*class, side.pick(!*new, *new));
                }
            }
            Change::InFlightQuota { old, new } => {
                if let Some(quotas) = &self.in_flight {
                    quotas.set_quota(side.pick(*old, *new)).map_err(|err| {
                        LimitsConfigError::at("admit.in_flight.quota", KeyProblem::InFlight(err))
                    })?;
                }
            }
            Change::Override { actor, old, new } => {
                if let Some(quotas) = &self.in_flight {
                    quotas
                        .set_override(actor.as_str(), side.pick(*old, *new))
                        .map_err(|err| {
                            LimitsConfigError::at(override_key(actor), KeyProblem::InFlight(err))
                        })?;
                }
            }
            Change::InFlightShadow { new } => {
                if let Some(quotas) = &self.in_flight {
                    quotas.set_shadow(side.pick(!*new, *new));
                }
            }
            Change::Volume { old, new } => {
                if let Some(volume) = &self.volume {
                    volume
                        .set_limits(side.pick(*old, *new))
                        .map_err(volume_error)?;
                }
            }
            Change::VolumeShadow { new } => {
                if let Some(volume) = &self.volume {
                    volume.set_shadow(side.pick(!*new, *new));
                }
            }
            Change::Bucket { old, new } => {
                if let Some(bucket) = &self.bucket {
                    bucket.set_config(side.pick(*old, *new)).map_err(|err| {
                        LimitsConfigError::at("admit.bucket", KeyProblem::Bucket(err))
                    })?;
                }
            }
            Change::BucketShadow { new } => {
                if let Some(bucket) = &self.bucket {
                    bucket.set_shadow(side.pick(!*new, *new));
                }
            }
        }
        Ok(())
    }
}

/// Which value of a change to make.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
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

/// One value a reload changes, with the value it replaces.
enum Change {
    Class {
        class: usize,
        old: BucketConfig,
        new: BucketConfig,
    },
    ClassShadow {
        class: usize,
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
    fn key(&self) -> String {
        match self {
            Self::Class { class, .. } => class_key(*class),
            Self::ClassShadow { class, .. } => format!("{}.shadow", class_key(*class)),
            Self::InFlightQuota { .. } => "admit.in_flight.quota".to_owned(),
            Self::Override { actor, .. } => override_key(actor),
            Self::InFlightShadow { .. } => "admit.in_flight.shadow".to_owned(),
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

fn class_key(class: usize) -> String {
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

fn limiter_build_error(err: LimiterConfigError) -> LimitsConfigError {
    match err {
        LimiterConfigError::ZeroCap | LimiterConfigError::CapTooLarge { .. } => {
            limiter_error("admit.limiter.cap", err)
        }
        LimiterConfigError::CoarseClassTooLong { class, .. } => {
            limiter_error(&class_key(class), err)
        }
        _ => limiter_error("admit.limiter.class", err),
    }
}
