//! [`LimitsConfigError`]: why a limits file was refused, always naming the key to change.

use crate::bucket::BucketConfigError;
use crate::fairness::QuotasConfigError;
use crate::gate::GateConfigError;
use crate::limiter::LimiterConfigError;
use crate::quota::RateLimitConfigError;
use std::fmt;
use std::path::PathBuf;

/// Why a limits file (an `[admit]` table) was refused, by [`LimitsConfig`](super::LimitsConfig)
/// parsing or by a [`LiveLimits`](super::LiveLimits) reload. When one key is to blame, the
/// message starts with its full path (`admit.limiter.class[1].rate: ...`) and says what to
/// write instead. A refused reload has changed nothing.
///
/// ```
/// use admit::live::{KeyProblem, LimitsConfig, LimitsConfigError};
///
/// let err = LimitsConfig::from_toml_str(
///     "[[admit.limiter.class]]\nburst = 20\nrate = \"10/m\"\n",
/// )
/// .unwrap_err();
/// assert_eq!(err.key(), Some("admit.limiter.class[0].rate"));
/// assert!(matches!(err, LimitsConfigError::Key { problem: KeyProblem::NotARate { .. }, .. }));
/// assert_eq!(
///     err.to_string(),
///     "admit.limiter.class[0].rate: \"10/m\" is not a rate: write N/s, N/min, N/h or N/d"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitsConfigError {
    /// One key (or table) is wrong.
    Key {
        /// Its full path, as `admit.limiter.class[1].rate`.
        key: String,
        /// What is wrong with it.
        problem: KeyProblem,
    },
    /// The document is not valid TOML.
    Syntax {
        /// The parser's message, with line and column.
        message: String,
    },
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// What is wrong with one key of a limits file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyProblem {
    /// Not a key of this table.
    Unknown {
        /// The keys this table accepts.
        expected: &'static [&'static str],
    },
    /// A required key (or table) is absent.
    Missing,
    /// The value has the wrong TOML type.
    WrongType {
        /// What the key takes.
        expected: &'static str,
        /// The TOML type found (`string`, `integer`, `float`, `boolean`, `datetime`, `array`,
        /// `table`).
        found: &'static str,
    },
    /// An integer outside the range the key takes.
    OutOfRange {
        /// The value as written.
        value: i64,
        /// The smallest accepted.
        min: u64,
        /// The largest accepted.
        max: u64,
    },
    /// A `rate` that is not `N/s`, `N/min`, `N/h` or `N/d`.
    NotARate {
        /// The value as written.
        value: String,
    },
    /// A duration that is not a whole number followed by `us`, `ms`, `s`, `min` or `h`.
    NotADuration {
        /// The value as written.
        value: String,
    },
    /// Both `rate` and `interval` are given: they say the same thing, so one must go.
    RateAndInterval,
    /// Neither `rate` nor `interval` is given.
    NoRate,
    /// The bucket these numbers make is refused.
    Bucket(BucketConfigError),
    /// The limiter refuses the value (at build, or the running limiter at reload).
    Limiter(LimiterConfigError),
    /// The in-flight quotas refuse the value.
    InFlight(QuotasConfigError),
    /// The volume quota refuses the value.
    Volume(RateLimitConfigError),
    /// The key is fixed when the primitive is built, and the file differs from the running one.
    FixedAtBuild {
        /// The running value.
        running: String,
        /// The file's value.
        found: String,
    },
    /// The file configures a primitive that the handle does not run (a reload neither adds
    /// nor removes a primitive).
    NotRunning,
    /// The in-flight quotas have an adaptive total: a gate without it would admit past it.
    AdaptiveGate,
    /// Not a key kind: a defence is keyed by `"claim"`, `"source"` or `"source-prefix"`.
    NotAKeyKind {
        /// The value as written.
        value: String,
    },
    /// The gate refuses the limits as stated (two share a name, a cost exceeds its burst, too
    /// many limits).
    Gate(GateConfigError),
    /// `min` is given with a cost that is not `"weight"`.
    MinWithoutWeight,
    /// The limiter's classes are given both as `[[admit.limiter.class]]` and as
    /// `[[admit.limit]]`.
    ClassesAndLimits,
    /// A gate is asked of a handle whose limiter states no `[[admit.limit]]`: its classes say
    /// no key and no cost.
    NoLimits,
    /// The reload changes the gate's plan: a limit added, removed or renamed, or a defence's
    /// key kind changed. The plan's shape is fixed when the gate is built.
    PlanFixed {
        /// The running plan's value.
        running: String,
        /// The file's value.
        found: String,
    },
    /// `[[admit.rule]]`s without `[admit.default_rule]`: every request no rule matches would
    /// be unlimited.
    NoDefaultRule,
    /// More `[[admit.rule]]`s than [`MAX_RULES`](super::MAX_RULES).
    TooManyRules {
        /// The most a file states.
        max: usize,
    },
    /// Not a method as a rule matches it: capitals, as `"POST"` (methods are case-sensitive,
    /// so `"post"` would match nothing a client sends as `POST`).
    NotAMethod {
        /// The value as written.
        value: String,
    },
    /// A rule's path does not start with `/`, as every request's path does.
    NotAPath {
        /// The value as written.
        value: String,
    },
    /// A rule states none of `exact`, `route` and `prefix`, or more than one.
    RulePath,
    /// `weight_min` or `weight_max` without `weight_header`.
    BoundsWithoutHeader,
    /// Not a header name (a token: letters, digits, `-` and the like).
    NotAHeader {
        /// The value as written.
        value: String,
    },
    /// A header weight's bounds start at 0, are empty, or do not hold the rule's `weight`
    /// (what a request no trusted proxy weighed is charged).
    WeightBounds {
        /// The rule's `weight`.
        weight: u32,
        /// `weight_min`.
        min: u32,
        /// `weight_max`.
        max: u32,
    },
    /// A rule names a limit no `[[admit.limit]]` has, or names one twice.
    NotALimit {
        /// The name.
        name: String,
        /// Whether it is named twice (rather than unknown).
        repeated: bool,
    },
    /// A rule charges no limit, and the file states no in-flight or volume quota: it would
    /// admit everything.
    RuleNoDefence,
    /// The reload removes, moves or changes a running rule where only its weights may change
    /// (see "What a reload may change" on `LiveLimits::routes`, feature `tower`).
    RuleFixed {
        /// The running rule's value.
        running: String,
        /// The file's value.
        found: String,
    },
    /// A rule added by a reload charges a limit by outcome, or keys the source's prefix, and
    /// no running rule does: the layer was built without reading it.
    RuleNeedsLayer {
        /// The layer's setting that reads it.
        setting: &'static str,
    },
    /// A rule reads a weight header, and the rules were built without the trusted proxies
    /// to believe it from (`LiveLimits::routes_trusting`, feature `tower`).
    NoTrustedProxies,
    /// The layer refuses the rule's gate or its header weight's bounds.
    #[cfg(feature = "tower")]
    Rule(crate::tower::AdmitConfigError),
}

impl LimitsConfigError {
    pub(super) fn at(key: impl Into<String>, problem: KeyProblem) -> Self {
        Self::Key {
            key: key.into(),
            problem,
        }
    }

    /// The full path of the key to change, when one key is to blame.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Key { key, .. } => Some(key),
            _ => None,
        }
    }
}

impl fmt::Display for LimitsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key { key, problem } => write!(f, "{key}: {problem}"),
            Self::Syntax { message } => write!(f, "the limits file is not valid TOML: {message}"),
            Self::Read { path, message } => {
                write!(
                    f,
                    "cannot read the limits file {}: {message}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for LimitsConfigError {}

impl fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown { expected } => write!(
                f,
                "is not a key this table takes (a misspelling?); it takes {}",
                expected.join(", ")
            ),
            Self::Missing => f.write_str("is missing; it is required here"),
            Self::WrongType { expected, found } => {
                write!(f, "is a {found}; write {expected}")
            }
            Self::OutOfRange { value, min, max } => {
                write!(
                    f,
                    "{value} is out of range; write a whole number from {min} to {max}"
                )
            }
            Self::NotARate { value } => {
                write!(f, "{value:?} is not a rate: write N/s, N/min, N/h or N/d")
            }
            Self::NotADuration { value } => write!(
                f,
                "{value:?} is not a duration: write a whole number and a unit, as \"100ms\" \
                 (units: us, ms, s, min, h, d)"
            ),
            Self::RateAndInterval => f.write_str(
                "`rate` and `interval` are both given; they say the same thing: keep one",
            ),
            Self::NoRate => f.write_str(
                "has no `rate` (as \"10/s\") or `interval` (as \"100ms\"); give one of them",
            ),
            Self::Bucket(err) => write!(f, "refused: {err}"),
            Self::Limiter(err) => write!(f, "refused: {err}"),
            Self::InFlight(err) => write!(f, "refused: {err}"),
            Self::Volume(err) => write!(f, "refused: {err}"),
            Self::FixedAtBuild { running, found } => write!(
                f,
                "is {found}, but the running value is {running} and it is fixed when the \
                 primitive is built; write {running} to reload, or restart to change it"
            ),
            Self::NotRunning => f.write_str(
                "configures a primitive this process does not run; a reload neither adds nor \
                 removes one: delete the table, or restart",
            ),
            Self::AdaptiveGate => f.write_str(
                "the in-flight quotas have an adaptive total: build their gate with \
                 `LiveLimits::adaptive_gate`",
            ),
            Self::NotAKeyKind { value } => write!(
                f,
                "{value:?} is not a key kind: write \"claim\", \"source\" or \"source-prefix\""
            ),
            Self::Gate(err) => write!(f, "refused: {err}"),
            Self::MinWithoutWeight => f.write_str(
                "`min` is the least a weighted cost charges; it goes with cost = \"weight\": \
                 delete it, or write cost = \"weight\"",
            ),
            Self::ClassesAndLimits => f.write_str(
                "the limiter's classes are given here and as [[admit.limit]] (each limit is a \
                 class of the limiter): keep one form",
            ),
            Self::NoLimits => f.write_str(
                "states no [[admit.limit]]: a gate charges limits that say their key and cost, \
                 and [[admit.limiter.class]] says neither; write the classes as [[admit.limit]]",
            ),
            Self::PlanFixed { running, found } => write!(
                f,
                "is {found}, but the running gate's plan has {running}; a plan's shape is fixed \
                 when the gate is built (tokens counted under one key kind say nothing of \
                 another, so a new key or a new limit would start every key at a full burst, \
                 and a limit's name is how a reload finds it): write {running} to reload, or \
                 restart to change it"
            ),
            Self::NoDefaultRule => f.write_str(
                "is missing while [[admit.rule]]s are given: every request no rule matches \
                 would be unlimited; add [admit.default_rule] with its `limits`",
            ),
            Self::TooManyRules { max } => write!(
                f,
                "is one rule too many: a file states at most {max} [[admit.rule]]s; merge rules \
                 with a `prefix`"
            ),
            Self::NotAMethod { value } => write!(
                f,
                "{value:?} is not a method as requests carry it: write it in capitals, as \
                 \"POST\" (methods are case-sensitive)"
            ),
            Self::NotAPath { value } => write!(
                f,
                "{value:?} does not start with `/`, as every request's path does: write \
                 \"/{value}\""
            ),
            Self::RulePath => f.write_str(
                "a rule states exactly one of `exact`, `route` and `prefix` (which paths it \
                 matches); give one",
            ),
            Self::BoundsWithoutHeader => f.write_str(
                "bounds a weight read from `weight_header`; it goes with `weight_header`: \
                 delete it, or add `weight_header`",
            ),
            Self::NotAHeader { value } => write!(
                f,
                "{value:?} is not a header name: write one as \"x-token-estimate\""
            ),
            Self::WeightBounds { weight, min, max } => write!(
                f,
                "weight_min = {min} and weight_max = {max} must satisfy 1 <= weight_min <= \
                 weight <= weight_max, and weight is {weight} (what a request no trusted proxy \
                 weighed is charged)"
            ),
            Self::NotALimit {
                name,
                repeated: true,
            } => write!(f, "names {name:?} twice; name each limit once"),
            Self::NotALimit {
                name,
                repeated: false,
            } => write!(
                f,
                "names {name:?}, which no [[admit.limit]] is named; write the `name` of one"
            ),
            Self::RuleNoDefence => f.write_str(
                "is empty and the file states no [admit.in_flight] or [admit.volume]: the rule \
                 would admit everything; name at least one [[admit.limit]]",
            ),
            Self::RuleFixed { running, found } => write!(
                f,
                "is {found}, but the running rule is {running}; a reload changes a rule's \
                 weights and adds rules after the running ones, and never removes, moves or \
                 changes one (each is published once and read without a lock): write \
                 {running} and put new rules last, or restart to change it"
            ),
            Self::RuleNeedsLayer { setting } => write!(
                f,
                "charges what no running rule does, and the layer was built without \
                 `{setting}`: its requests could not be charged as stated; restart with the \
                 rule"
            ),
            Self::NoTrustedProxies => f.write_str(
                "reads a weight from a header, and the rules were built without the trusted \
                 proxies to believe it from: build them with `LiveLimits::routes_trusting`",
            ),
            #[cfg(feature = "tower")]
            Self::Rule(err) => write!(f, "refused: {err}"),
        }
    }
}
