//! Every limit in one `[admit]` TOML table, validated with errors that name the key, and
//! reloaded into the running primitives all at once or not at all (feature `config`).
//!
//! # The file
//!
//! ```toml
//! [admit.limiter]              # a keyed Limiter
//! cap = 65536                  # fixed at build (default 4096)
//!
//! [[admit.limiter.class]]      # class 0
//! burst = 20
//! rate = "10/s"                # N/s, N/min, N/h or N/d ...
//! shadow = false               # decide but never refuse (default false)
//!
//! [[admit.limiter.class]]      # class 1
//! burst = 5
//! interval = "12s"             # ... or one token per interval: us, ms, s, min, h
//!
//! [admit.in_flight]            # fairness::Quotas
//! quota = 8                    # ops awaiting the writer per actor, or "unlimited"
//! actors = 4096                # fixed at build (default 1024)
//! override_capacity = 64       # actors that may ever hold an override, fixed at build
//! shadow = false
//! overrides = { importer = 32 }
//!
//! [admit.volume]               # quota::RateLimit
//! events = 1200
//! bytes = 8388608
//! window = "60s"
//! rows = 4                     # fixed at build (default 4)
//!
//! [admit.bucket]               # one TokenBucket
//! burst = 100
//! rate = "50/s"
//! ```
//!
//! Every table is optional, and the file may hold other tables (`[registrar]`, an
//! application's own): only `[admit]` is read, and inside it every key is checked. An unknown
//! key is an error naming it, so a misspelt limit never silently keeps its default. Inside a
//! table the file says everything: an absent `shadow` is `false`, an absent override is no
//! override. A class's rate is written either as `rate` or as `interval`, never both.
//! Numbers are whole: no fraction is accepted anywhere.
//!
//! # A gate's plan
//!
//! The file may state a [`Gate`](crate::gate::Gate)'s rate limits instead of bare classes:
//!
//! ```toml
//! [[admit.limit]]              # limit 0: class 0 of the limiter ([admit.limiter] gives its cap)
//! name = "per source"          # what a refusal names, and how a reload finds the limit
//! key = "source"               # "claim", "source" or "source-prefix"
//! rate = "10/s"                # or interval
//! burst = 20
//! cost = 1                     # tokens an admission (default 1), or "weight" with min
//!
//! [[admit.limit]]
//! name = "tokens per claim"
//! key = "claim"
//! rate = "100/s"
//! burst = 100
//! cost = "weight"              # the admission's weight ...
//! min = 1                      # ... and never less (default 1)
//!
//! [[admit.limit]]
//! name = "failed logins"
//! key = "claim"
//! rate = "5/h"
//! burst = 5
//! outcome = true               # only checked at admission; Gate::charge_outcome charges it
//!
//! [admit.in_flight]
//! quota = 8
//! key = "claim"                # what the gate keys the places by (default "claim")
//! ```
//!
//! Each limit is a class of one limiter, so its cap holds active keys × limits, and
//! `[[admit.limiter.class]]` is then not given. A cost above its burst, two limits with one
//! name and more than [`MAX_LIMITS`](crate::gate::MAX_LIMITS) limits are refused, naming the
//! key. [`LiveLimits::gate`] builds the gate over the running primitives; a reload changes its
//! numbers (rates, bursts, costs, quotas, shadow switches) while it admits, and refuses a file
//! that would change its shape: a limit added, removed or renamed, or a defence's `key`
//! changed (tokens counted under one key say nothing of another, so a new key would start
//! every key at a full burst).
//!
//! # Reloading
//!
//! [`LiveLimits`] holds the running primitives. [`LiveLimits::reload`] reads the file,
//! validates all of it (syntax, every key, and every value against the running primitives:
//! a limiter's class must fit the limiter's unit, a key fixed at build must not change), and
//! only then applies it. If anything is wrong, nothing changes: the running limits stay, and
//! the error names the key to fix. What a change does to actors in flight (an actor that owes
//! tokens, permits above a lowered quota) is each primitive's own rule, described with its
//! runtime setter and in `docs/en/operations.md`, "Changing a limit during an incident".
//!
//! ```
//! use admit::live::LiveLimits;
//!
//! let live = LiveLimits::from_toml_str(
//!     "[[admit.limiter.class]]\nburst = 20\nrate = \"10/s\"\n",
//! )?;
//! let limiter = live.limiter().expect("the file has a limiter").clone();
//! assert!(limiter.try_acquire("alice", 0).is_ok());
//!
//! // A bad key among good ones: refused, nothing applied.
//! let err = live
//!     .reload_str("[[admit.limiter.class]]\nburst = 40\nrate = \"10/m\"\n")
//!     .unwrap_err();
//! assert_eq!(err.key(), Some("admit.limiter.class[0].rate"));
//! assert_eq!(limiter.config(0).map(|c| c.burst()), Some(20));
//!
//! // Fixed, it applies.
//! live.reload_str("[[admit.limiter.class]]\nburst = 40\nrate = \"10/s\"\n")?;
//! assert_eq!(limiter.config(0).map(|c| c.burst()), Some(40));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!

#[cfg(test)]
mod adaptive_tests;
mod apply;
mod error;
#[cfg(test)]
mod gate_tests;
mod parse;
mod plan;
#[cfg(test)]
mod reload_tests;
mod rules;
#[cfg(test)]
mod rules_tests;
#[cfg(test)]
mod tests;
mod values;

pub use apply::{LiveLimits, Reloaded};
pub use error::{KeyProblem, LimitsConfigError};
pub use rules::{RoutesConfig, RuleConfig, RulePath, WeightHeader, MAX_RULES};

use crate::bucket::BucketConfig;
use crate::gate::{Cost, KeyKind};
use crate::quota::Quota;
use std::collections::BTreeMap;
use std::path::Path;

/// The `[admit]` table, parsed and validated on its own (the running primitives are checked
/// at reload). A table the file leaves out is `None`.
///
/// ```
/// use admit::live::LimitsConfig;
/// use std::time::Duration;
///
/// let config = LimitsConfig::from_toml_str(
///     "[admit.bucket]\nburst = 100\nrate = \"50/s\"\n\n[registrar]\nlisten = \"x\"\n",
/// )?;
/// let bucket = config.bucket.expect("[admit.bucket] is given");
/// assert_eq!(bucket.config.burst(), 100);
/// assert_eq!(bucket.config.refill_interval(), Duration::from_millis(20));
/// assert!(config.limiter.is_none());
/// # Ok::<(), admit::live::LimitsConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsConfig {
    /// `[admit.limiter]`: a keyed [`Limiter`](crate::Limiter). With `[[admit.limit]]`, its
    /// classes are the limits' rates, class `i` limit `i`'s.
    pub limiter: Option<LimiterLimits>,
    /// `[[admit.limit]]`: a [`Gate`](crate::gate::Gate)'s rate limits, in the order an
    /// admission charges them, each a class of the limiter (empty if the file states none).
    pub limits: Vec<GateLimit>,
    /// `[admit.in_flight]`: [`fairness::Quotas`](crate::fairness::Quotas).
    pub in_flight: Option<InFlightLimits>,
    /// `[admit.volume]`: a [`quota::RateLimit`](crate::quota::RateLimit).
    pub volume: Option<VolumeLimits>,
    /// `[admit.bucket]`: one [`TokenBucket`](crate::TokenBucket).
    pub bucket: Option<BucketLimits>,
    /// `[admit.default_rule]` and `[[admit.rule]]`: per-route rules over the
    /// `[[admit.limit]]`s (`None` if the file states none).
    pub routes: Option<RoutesConfig>,
}

/// `[admit.limiter]`: the cap and one `[[admit.limiter.class]]` per class, in class order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterLimits {
    /// `cap`: the most live entries, fixed at build ([`DEFAULT_CAP`](crate::DEFAULT_CAP) if
    /// absent).
    pub cap: usize,
    /// `class`: the classes, class `i` the `i`-th.
    pub classes: Vec<ClassLimits>,
}

/// One `[[admit.limit]]`: what the gate charges and to which key. Its rate, burst and
/// `shadow` are its class of the limiter ([`LimiterLimits::classes`], at the limit's index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateLimit {
    /// `name`: what a refusal ([`GateRefused::Rate`](crate::gate::GateRefused::Rate)) names,
    /// and how a reload finds the limit.
    pub name: String,
    /// `key`: `"claim"`, `"source"` or `"source-prefix"`.
    pub key: KeyKind,
    /// `cost`: a whole number of tokens (1 if absent), or `"weight"` with `min` (1 if absent).
    pub cost: Cost,
    /// `outcome = true`: charged by outcome
    /// ([`Limit::by_outcome`](crate::gate::Limit::by_outcome)), only checked at admission.
    pub outcome: bool,
}

/// One `[[admit.limiter.class]]`, or the rate of one `[[admit.limit]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassLimits {
    /// `burst` with `rate` or `interval`: the class's entries, and its overflow bucket (which
    /// identities without an entry share), whose numbers are always the class's own.
    pub config: BucketConfig,
    /// `shadow`: decide, but admit what would be refused.
    pub shadow: bool,
}

/// `[admit.in_flight]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlightLimits {
    /// `quota`: ops awaiting the writer per actor ([`UNLIMITED`](crate::fairness::UNLIMITED)
    /// for `"unlimited"`).
    pub quota: u32,
    /// `actors`: actors with an entry of their own at once, fixed at build.
    pub actors: usize,
    /// `override_capacity`: how many distinct actors may ever be given an override, fixed at
    /// build ([`DEFAULT_OVERRIDE_CAPACITY`](crate::fairness::DEFAULT_OVERRIDE_CAPACITY) if
    /// absent; a removed override keeps its actor's place).
    pub override_capacity: usize,
    /// `overrides`: a quota per named actor. The name is hashed as a `str`, so it matches
    /// acquires with a `&str` or a `String` of the same text.
    pub overrides: BTreeMap<String, u32>,
    /// `shadow`.
    pub shadow: bool,
    /// `key`: what a [`Gate`](crate::gate::Gate) keys the places by (the claim if absent).
    pub key: KeyKind,
    /// `[admit.in_flight.total]`: the adaptive total (`target`, `floor`, `ceiling`,
    /// `initial`, and the `normal` and `sheddable` shares in permille), if any: the quotas are
    /// then [`AdaptiveQuotas`](crate::fairness::AdaptiveQuotas), and
    /// [`LiveLimits::adaptive_gate`] builds their gate. Whether there is one is fixed at
    /// build; its settings but `initial` are reloaded.
    pub total: Option<crate::fairness::AdaptiveTotal>,
}

/// `[admit.volume]`: `events`, `bytes`, `window` and `rows` make the [`Quota`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeLimits {
    /// The quota.
    pub quota: Quota,
    /// `shadow`.
    pub shadow: bool,
    /// `key`: what a [`Gate`](crate::gate::Gate) keys the volume by (the claim if absent).
    pub key: KeyKind,
}

/// `[admit.bucket]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketLimits {
    /// `burst` with `rate` or `interval`.
    pub config: BucketConfig,
    /// `shadow`.
    pub shadow: bool,
}

impl LimitsConfig {
    /// Parses a whole document and reads its `[admit]` table; other tables are ignored.
    pub fn from_toml_str(document: &str) -> Result<Self, LimitsConfigError> {
        parse::parse_document(document)
    }

    /// Reads the file at `path` and parses it.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LimitsConfigError> {
        Self::from_toml_str(&read(path.as_ref())?)
    }
}

fn read(path: &Path) -> Result<String, LimitsConfigError> {
    std::fs::read_to_string(path).map_err(|err| LimitsConfigError::Read {
        path: path.to_owned(),
        message: err.to_string(),
    })
}
