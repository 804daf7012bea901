//! [`LiveLimits`]: the running primitives, built from a limits file and reloaded from it (the
//! reload protocol itself, check then apply, is in `plan.rs`).

use super::parse::limit_key;
use super::plan::{class_key, limiter_build_error, Change, Running, Side};
#[cfg(feature = "tower")]
use super::rules::LiveRoutes;
use super::rules::{plan_routes, rule_key};
use super::{read, KeyProblem, LimitsConfig, LimitsConfigError, RoutesConfig};
use crate::bucket::TokenBucket;
use crate::clock::{Clock, RecentClock};
use crate::fairness::{AdaptiveQuotas, Quotas, QuotasConfigError};
use crate::gate::{Gate, KeyKind, Limit};
use crate::limiter::Limiter;
use crate::quota::RateLimit;
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
pub struct LiveLimits<C: Clock + 'static = RecentClock> {
    pub(super) limiter: Option<Arc<Limiter<C>>>,
    pub(super) in_flight: Option<Arc<Quotas>>,
    /// The same quotas with their adaptive total (`[admit.in_flight.total]`), if the file
    /// gave one.
    pub(super) adaptive: Option<AdaptiveQuotas<C>>,
    pub(super) volume: Option<Arc<RateLimit<C>>>,
    /// The bucket, and the clock it is taken with: a change to it is made at that clock's
    /// reading (see [`TokenBucket::set_config`]).
    pub(super) bucket: Option<(Arc<TokenBucket>, C)>,
    /// The overrides the last applied file set (a reload removes those it no longer names),
    /// behind the lock that serialises reloads.
    pub(super) overrides: Mutex<BTreeMap<String, u32>>,
    /// The `[[admit.limit]]`s, limit `i` class `i` of the limiter: shared with every gate
    /// [`LiveLimits::gate`] builds, so a reload changes their costs in place.
    pub(super) limits: Option<Arc<[Limit]>>,
    /// What a gate keys the in-flight places by (`[admit.in_flight] key`).
    pub(super) in_flight_key: KeyKind,
    /// What a gate keys the volume by (`[admit.volume] key`).
    pub(super) volume_key: KeyKind,
    /// The rules the last applied file stated, and what was built of them; locked after
    /// `overrides` by a reload.
    pub(super) rules: Mutex<RulesState<C>>,
}

/// The per-route rules: as the last applied file states them, and as built.
pub(super) struct RulesState<C: Clock + 'static> {
    pub(super) applied: Option<RoutesConfig>,
    /// The limits each rule's gate charges (copies of some of `LiveLimits::limits`): a reload
    /// sets a changed cost on each.
    pub(super) subsets: Vec<Arc<[Limit]>>,
    /// The rules every layer built from the handle shares, once built.
    #[cfg(feature = "tower")]
    pub(super) built: Option<LiveRoutes<C>>,
    #[cfg(not(feature = "tower"))]
    pub(super) built: std::marker::PhantomData<C>,
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

impl<C: Clock + 'static> Default for LiveLimits<C> {
    fn default() -> Self {
        Self {
            limiter: None,
            in_flight: None,
            adaptive: None,
            volume: None,
            bucket: None,
            overrides: Mutex::new(BTreeMap::new()),
            limits: None,
            in_flight_key: KeyKind::Claim,
            volume_key: KeyKind::Claim,
            rules: Mutex::new(RulesState {
                applied: None,
                subsets: Vec::new(),
                built: Default::default(),
            }),
        }
    }
}

impl<C: Clock + 'static> fmt::Debug for LiveLimits<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveLimits")
            .field("limiter", &self.limiter.is_some())
            .field("in_flight", &self.in_flight.is_some())
            .field("volume", &self.volume.is_some())
            .field("bucket", &self.bucket.is_some())
            .field("limits", &self.limits)
            .finish()
    }
}

impl<C: Clock + Clone + 'static> LiveLimits<C> {
    /// Builds every primitive `config` configures, the limiter and the volume quota reading
    /// `clock`; a change to the bucket is made at `clock`'s reading (take from it with the
    /// same clock, see [`LiveLimits::with_bucket`]).
    pub fn from_config_with_clock(config: &LimitsConfig, clock: C) -> Result<Self> {
        let mut live = Self::new();
        let from_limits = !config.limits.is_empty();
        let (key_of, classes): (fn(usize) -> String, _) = if from_limits {
            (limit_key, "admit.limit")
        } else {
            (class_key, "admit.limiter.class")
        };
        if let Some(file) = &config.limiter {
            let limiter = Limiter::builder()
                .cap(file.cap)
                .build_with_clock(file.classes.iter().map(|c| c.config), clock.clone())
                .map_err(|err| limiter_build_error(err, key_of, classes))?;
            for (class, file) in file.classes.iter().enumerate() {
                limiter
                    .set_shadow(class, file.shadow)
                    .map_err(|_| LimitsConfigError::at(key_of(class), KeyProblem::Missing))?;
            }
            live.limiter = Some(Arc::new(limiter));
        }
        if from_limits {
            live.limits = Some(
                config
                    .limits
                    .iter()
                    .enumerate()
                    .map(|(class, limit)| {
                        let planned = Limit::new(limit.name.as_str(), class)
                            .keyed_by(limit.key)
                            .cost(limit.cost);
                        if limit.outcome {
                            planned.by_outcome()
                        } else {
                            planned
                        }
                    })
                    .collect(),
            );
        }
        if let Some(file) = &config.in_flight {
            let builder = file.overrides.iter().fold(
                Quotas::builder()
                    .quota(file.quota)
                    .actors(file.actors)
                    .override_capacity(file.override_capacity),
                |b, (actor, limit)| b.override_quota(actor.as_str(), *limit),
            );
            let refused = |err| {
                let key = match err {
                    QuotasConfigError::ZeroQuota => "admit.in_flight.quota",
                    QuotasConfigError::TooManyOverrides { .. } => {
                        "admit.in_flight.override_capacity"
                    }
                    QuotasConfigError::AdaptiveTotal(_) => "admit.in_flight.total",
                    _ => "admit.in_flight.actors",
                };
                LimitsConfigError::at(key, KeyProblem::InFlight(err))
            };
            let quotas = match file.total {
                None => builder.build().map_err(refused)?,
                Some(total) => {
                    let adaptive = builder
                        .build_adaptive_with_clock(total, clock.clone())
                        .map_err(refused)?;
                    let quotas = adaptive.quotas().clone();
                    live.adaptive = Some(adaptive);
                    quotas
                }
            };
            quotas.set_shadow(file.shadow);
            live.in_flight = Some(Arc::new(quotas));
            live.in_flight_key = file.key;
            *live
                .overrides
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner) = file.overrides.clone();
        }
        if let Some(file) = &config.volume {
            let volume = RateLimit::with_clock(file.quota, clock.clone());
            volume.set_shadow(file.shadow);
            live.volume = Some(Arc::new(volume));
            live.volume_key = file.key;
        }
        if let Some(file) = &config.bucket {
            let bucket = TokenBucket::new(file.config);
            bucket.set_shadow(file.shadow);
            live.bucket = Some((Arc::new(bucket), clock));
        }
        live.rules
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .applied = config.routes.clone();
        Ok(live)
    }
}

impl<C: Clock + 'static> LiveLimits<C> {
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

    /// Reloads `bucket`, taken with readings of `clock`, from `[admit.bucket]`: a change is
    /// made at `clock`'s reading, the instant the tokens owed are carried over at (see
    /// [`TokenBucket::set_config`]).
    ///
    /// ```
    /// use admit::live::LiveLimits;
    /// use admit::{BucketConfig, Clock, ManualClock, TokenBucket};
    /// use std::sync::Arc;
    ///
    /// let clock = ManualClock::new();
    /// let bucket = Arc::new(TokenBucket::new(BucketConfig::per_second(100)?));
    /// let live = LiveLimits::new().with_bucket(bucket.clone(), clock.clone());
    /// assert!(bucket.try_acquire_n(&clock, 100).is_ok()); // owes 100 tokens
    /// live.reload_str("[admit.bucket]\nburst = 100\nrate = \"1/s\"\n")?;
    /// assert_eq!(bucket.available_at(clock.now_ns()), 0, "the 100 tokens are still owed");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_bucket(mut self, bucket: Arc<TokenBucket>, clock: C) -> Self {
        self.bucket = Some((bucket, clock));
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
        self.bucket.as_ref().map(|(bucket, _)| bucket)
    }

    /// The gate's rate limits (`[[admit.limit]]`), limit `i` class `i` of
    /// [`LiveLimits::limiter`], if the file stated them.
    pub fn limits(&self) -> Option<&[Limit]> {
        self.limits.as_deref()
    }

    /// A [`Gate`] charging the running primitives as the file states: the in-flight quotas by
    /// `[admit.in_flight] key`, every `[[admit.limit]]` by its key and cost, in order, then the
    /// volume quota by `[admit.volume] key` (each table left out of the file is a defence left
    /// out of the gate; `[admit.bucket]` is not one of its defences). The gate shares the
    /// primitives and the limits: a reload changes its rates, bursts, costs, quotas and shadow
    /// switches while it runs, all or nothing, and never its shape. Build it once and share it
    /// (an `Arc`, or a `static` for a [`Pass<'static>`](crate::gate::Pass)); each call builds
    /// another gate over the same primitives.
    ///
    /// Refused ([`KeyProblem::NoLimits`]) when the limiter's classes were given as
    /// `[[admit.limiter.class]]` (or by [`LiveLimits::with_limiter`]): they state no key and no
    /// cost.
    ///
    /// ```
    /// use admit::gate::{Admission, GateRefused, KeyKind};
    /// use admit::live::LiveLimits;
    ///
    /// let file = |rate: &str| format!(
    ///     "[[admit.limit]]\nname = \"per source\"\nkey = \"source\"\nrate = \"{rate}\"\nburst = 2\n\n\
    ///      [admit.in_flight]\nquota = 8\nkey = \"claim\"\n"
    /// );
    /// let live = LiveLimits::from_toml_str(&file("1/h"))?;
    /// let gate = live.gate()?;
    /// // Two claims behind one source share its burst of 2.
    /// let _a = gate.try_admit(&Admission::new("alice", "10.0.0.1"))?;
    /// let _b = gate.try_admit(&Admission::new("bob", "10.0.0.1"))?;
    /// let refused = gate.try_admit(&Admission::new("carol", "10.0.0.1")).unwrap_err();
    /// assert!(matches!(refused, GateRefused::Rate { key: KeyKind::Source, .. }));
    /// assert!(gate.try_admit(&Admission::new("carol", "10.0.0.2")).is_ok());
    ///
    /// // A reload changes the running gate's limits.
    /// live.reload_str(&file("1/h").replace("burst = 2", "burst = 3"))?;
    /// assert!(gate.try_admit(&Admission::new("carol", "10.0.0.1")).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gate(&self) -> Result<Gate<C>> {
        if self.limiter.is_some() && self.limits.is_none() {
            return Err(LimitsConfigError::at("admit.limit", KeyProblem::NoLimits));
        }
        self.gate_charging(self.limits.clone())
    }

    /// A gate over the running primitives charging `limits` (classes of the limiter; none
    /// without a limiter). Refused for quotas with an adaptive total: a plain gate (or a rule's)
    /// would admit past the total ([`LiveLimits::adaptive_gate`] is theirs).
    fn gate_charging(&self, limits: Option<Arc<[Limit]>>) -> Result<Gate<C>> {
        if self.adaptive.is_some() {
            return Err(LimitsConfigError::at(
                "admit.in_flight.total",
                KeyProblem::AdaptiveGate,
            ));
        }
        let mut gate = Gate::new();
        if let Some(quotas) = &self.in_flight {
            // A clone of the quotas shares their table and limits.
            gate = gate.in_flight_keyed(Quotas::clone(quotas), self.in_flight_key);
        }
        self.with_rates_and_volume(gate, limits)
    }

    /// [`LiveLimits::gate`] for a file whose `[admit.in_flight]` has a `total`: the gate's
    /// in-flight slot holds the [`AdaptiveQuotas`], whose total a reload retunes (its target,
    /// bounds and shares) while the gate runs. Refused ([`KeyProblem::Missing`] on
    /// `admit.in_flight.total`) without one.
    ///
    /// ```
    /// use admit::fairness::Priority;
    /// use admit::gate::Admission;
    /// use admit::live::LiveLimits;
    ///
    /// let file = |ceiling: u32| format!(
    ///     "[admit.in_flight]\nquota = 32\n\n[admit.in_flight.total]\ntarget = \"20ms\"\n\
    ///      initial = 4\nceiling = {ceiling}\n"
    /// );
    /// let live = LiveLimits::from_toml_str(&file(100))?;
    /// let gate = live.adaptive_gate()?;
    /// let _a = gate.try_admit(&Admission::of("a"))?; // normal: half of L = 4
    /// let _b = gate.try_admit(&Admission::of("b"))?;
    /// assert!(gate.try_admit(&Admission::of("c")).is_err(), "normal's share is full");
    /// assert!(gate.try_admit(&Admission::of("c").priority(Priority::Critical)).is_ok());
    /// // A reload retunes the running total: L is clamped to the new ceiling.
    /// live.reload_str(&file(2))?;
    /// assert_eq!(live.adaptive().map(|q| q.limit()), Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn adaptive_gate(&self) -> Result<Gate<C, AdaptiveQuotas<C>>>
    where
        C: fmt::Debug + 'static,
    {
        let quotas = self
            .adaptive
            .clone()
            .ok_or_else(|| LimitsConfigError::at("admit.in_flight.total", KeyProblem::Missing))?;
        if self.limiter.is_some() && self.limits.is_none() {
            return Err(LimitsConfigError::at("admit.limit", KeyProblem::NoLimits));
        }
        let gate = Gate::new().in_flight_keyed(quotas, self.in_flight_key);
        self.with_rates_and_volume(gate, self.limits.clone())
    }

    /// The in-flight quotas with their adaptive total, if the file gave one.
    pub fn adaptive(&self) -> Option<&AdaptiveQuotas<C>> {
        self.adaptive.as_ref()
    }

    /// `gate` charging `limits` (classes of the limiter) and the volume quota.
    fn with_rates_and_volume<I: crate::gate::InFlight>(
        &self,
        mut gate: Gate<C, I>,
        limits: Option<Arc<[Limit]>>,
    ) -> Result<Gate<C, I>> {
        if let (Some(limiter), Some(limits)) = (&self.limiter, limits) {
            if !limits.is_empty() {
                gate = gate
                    .rates_shared(Arc::clone(limiter), limits)
                    .map_err(|err| LimitsConfigError::at("admit.limit", KeyProblem::Gate(err)))?;
            }
        }
        if let Some(volume) = &self.volume {
            gate = gate.volume_shared(Arc::clone(volume), self.volume_key);
        }
        Ok(gate)
    }

    /// The gate of a rule charging the limits `names`, in the file's order: copies of those
    /// limits, added to `subsets` so that a reload changes their costs with the originals'.
    #[cfg(feature = "tower")]
    fn rule_gate(&self, names: &[String], subsets: &mut Vec<Arc<[Limit]>>) -> Result<Gate<C>> {
        let subset: Arc<[Limit]> = self
            .limits
            .iter()
            .flat_map(|limits| limits.iter())
            .filter(|limit| names.iter().any(|name| name == limit.name()))
            .cloned()
            .collect();
        if !subset.is_empty() {
            subsets.push(Arc::clone(&subset));
        }
        self.gate_charging(Some(subset))
    }

    /// The per-route rules the file states (`[admit.default_rule]`, `[[admit.rule]]`), for
    /// [`AdmitLayerBuilder::routes`](crate::tower::AdmitLayerBuilder::routes): each rule
    /// admits through a gate over the running primitives that charges the limits it names
    /// (with the in-flight and volume quotas, if the file states them). Limits are shared
    /// between rules: two rules naming `"per source"` charge one bucket per source.
    ///
    /// The first call builds the rules; every later call returns the same rules, and a reload
    /// changes them for every layer at once. What a reload may change: a rule's `weight`,
    /// `weight_min` and `weight_max`, the default rule's `weight`, every limit's numbers, and
    /// new rules after the running ones (tried in the file's order, before the default).
    /// What it refuses, naming the rule: a rule removed, moved, or given another method,
    /// path, `limits` or `weight_header`, and the default rule's `limits`
    /// ([`KeyProblem::RuleFixed`]); a new rule that needs a layer setting no running rule
    /// needed ([`KeyProblem::RuleNeedsLayer`]). Each rule is published once and read without
    /// a lock, so a decision never sees the list half changed.
    ///
    /// Refused when the file states no rules (`admit.default_rule`: [`KeyProblem::Missing`])
    /// and for a rule reading `weight_header` ([`KeyProblem::NoTrustedProxies`]: use
    /// [`LiveLimits::routes_trusting`]).
    ///
    /// ```
    /// use admit::live::LiveLimits;
    /// use admit::tower::{AdmitLayer, HeaderKey};
    /// use http::HeaderName;
    ///
    /// let file = |login_weight: u32| format!(r#"
    /// [[admit.limit]]
    /// name = "per client"
    /// key = "claim"
    /// rate = "100/min"
    /// burst = 100
    /// cost = "weight"
    ///
    /// [admit.default_rule]
    /// limits = ["per client"]
    ///
    /// [[admit.rule]]
    /// method = "POST"
    /// exact = "/login"
    /// limits = ["per client"]
    /// weight = {login_weight}
    /// "#);
    /// let live = LiveLimits::from_toml_str(&file(10))?;
    /// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-client")))
    ///     .routes(live.routes()?)
    ///     .build()?;
    /// # let _ = layer;
    /// // A login now costs 20: in place, for the running layer.
    /// assert_eq!(live.reload_str(&file(20))?.changed(), ["admit.rule[0].weight"]);
    /// // Moving the rule is refused, naming it; nothing changes.
    /// let moved = live.reload_str(&file(20).replace("\"/login\"", "\"/signin\"")).unwrap_err();
    /// assert_eq!(moved.key(), Some("admit.rule[0]"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tower")]
    pub fn routes(&self) -> Result<crate::tower::Routes<C>> {
        self.routes_with(None)
    }

    /// [`LiveLimits::routes`], the rules with a `weight_header` believing it from the peers
    /// `trust` trusts ([`ClientIp::is_trusted_peer`](crate::tower::ClientIp::is_trusted_peer):
    /// hand it the extractor the layer reads the client's address with). From any other peer,
    /// and for an absent or malformed value, such a rule charges its `weight`; a value read is
    /// held to `weight_min..=weight_max` (see [`Rule::weight_from_header`](crate::tower::Rule::weight_from_header)).
    /// The first call's trust is the rules' for good, including the rules a reload adds.
    #[cfg(feature = "tower")]
    pub fn routes_trusting(
        &self,
        trust: &crate::tower::ClientIp,
    ) -> Result<crate::tower::Routes<C>> {
        self.routes_with(Some(trust))
    }

    #[cfg(feature = "tower")]
    fn routes_with(
        &self,
        trust: Option<&crate::tower::ClientIp>,
    ) -> Result<crate::tower::Routes<C>> {
        let mut state = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(built) = &state.built {
            return Ok(built.routes());
        }
        let Some(config) = state.applied.clone() else {
            return Err(LimitsConfigError::at(
                "admit.default_rule",
                KeyProblem::Missing,
            ));
        };
        let mut subsets = Vec::new();
        let default = self.rule_gate(&config.default.limits, &mut subsets)?;
        let built = LiveRoutes::new(&config.default, default, trust)?;
        for (i, rule) in config.rules.iter().enumerate() {
            let gate = self.rule_gate(&rule.limits, &mut subsets)?;
            let (rule, routed) = built.build(i, rule, gate)?;
            built.publish(i, rule, routed);
        }
        state.subsets.extend(subsets);
        let routes = built.routes();
        state.built = Some(built);
        Ok(routes)
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

    /// The primitives held, borrowed for a reload, with the rules' state (locked).
    fn running<'a>(&'a self, rules: &'a RulesState<C>) -> Running<'a, C> {
        Running {
            subsets: &rules.subsets,
            #[cfg(feature = "tower")]
            routes: rules.built.as_ref(),
            limiter: self.limiter.as_deref(),
            in_flight: self.in_flight.as_deref(),
            adaptive: self.adaptive.as_ref(),
            volume: self.volume.as_deref(),
            bucket: self
                .bucket
                .as_ref()
                .map(|(bucket, clock)| (&**bucket, clock)),
            limits: self.limits.as_deref(),
            in_flight_key: self.in_flight_key,
            volume_key: self.volume_key,
        }
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
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        let running = self.running(&rules);
        let mut plan = running.plan(config, &overrides)?;
        let (weights, added) = plan_routes(
            rules.applied.as_ref(),
            config.routes.as_ref(),
            &config.limits,
        )?;
        let new_rules = config
            .routes
            .iter()
            .flat_map(|routes| routes.rules.iter().enumerate())
            .skip(
                rules
                    .applied
                    .as_ref()
                    .map_or(0, |routes| routes.rules.len()),
            );
        #[cfg(feature = "tower")]
        if let Some(built) = &rules.built {
            for (i, rule) in new_rules.clone() {
                built.check(i, rule)?;
            }
        }
        plan.extend(weights.into_iter().map(Change::RuleWeight));
        // The changes a setter can still refuse (an override, whose free slots another thread
        // may take meanwhile) go first: once they are made, nothing left can be refused, so
        // no limit with tokens behind it is ever changed and then undone.
        plan.sort_by_key(|change| !change.may_be_refused());
        for (done, change) in plan.iter().enumerate() {
            if let Err(err) = running.make(change, Side::New) {
                for undo in plan.iter().take(done).rev() {
                    // The old values were running a moment ago: restoring them cannot be
                    // refused, and if it were there would be nothing better to do. Only
                    // overrides come before a refusal, and they carry no tokens.
                    let _ = running.make(undo, Side::Old);
                }
                return Err(err);
            }
        }
        // The new rules last: published, they stay, so everything that may be refused is
        // behind them (their gates charge the limits as just changed).
        let mut changed: Vec<String> = plan.iter().map(Change::key).collect();
        #[cfg(feature = "tower")]
        if let Some(built) = &rules.built {
            let mut subsets = Vec::new();
            let ready = new_rules
                .clone()
                .map(|(i, rule)| {
                    let gate = self.rule_gate(&rule.limits, &mut subsets)?;
                    Ok((i, built.build(i, rule, gate)?))
                })
                .collect::<Result<Vec<_>>>();
            let ready = match ready {
                Ok(ready) => ready,
                Err(err) => {
                    // Checked before anything was made (`LiveRoutes::check`); a gate the
                    // changed limits refused would land here, and the reload is undone.
                    for undo in plan.iter().rev() {
                        let _ = running.make(undo, Side::Old);
                    }
                    return Err(err);
                }
            };
            for (i, (rule, routed)) in ready {
                built.publish(i, rule, routed);
            }
            rules.subsets.extend(subsets);
        }
        changed.extend(new_rules.map(|(i, _)| rule_key(i)));
        debug_assert_eq!(changed.len(), plan.len() + added);
        if let Some(file) = &config.in_flight {
            *overrides = file.overrides.clone();
        }
        rules.applied = config.routes.clone();
        Ok(Reloaded { changed })
    }
}
