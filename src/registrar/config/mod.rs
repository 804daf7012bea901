//! [`RegistrarConfig`]: the four `rate_limit_*` keys of the `[registrar]` table, their
//! defaults and their validation. Loading them from TOML (feature `config`) is in `load`.

#[cfg(feature = "config")]
mod load;
#[cfg(test)]
mod tests;

#[cfg(feature = "config")]
pub use load::LoadedRegistrar;

use super::Bucket;
use crate::bucket::{BucketConfig, BucketConfigError};
use std::fmt;
use std::path::PathBuf;

/// The registrar profile's four rate-limit keys, as plain numbers.
///
/// Every key is an unsigned integer; nothing in the configuration is floating-point. A refill
/// *rate* would have to be fractional to say "one token per second or slower", which drags in
/// negative zero, NaN, infinity and rounding; a refill *interval* in whole milliseconds says
/// the same with a plain integer.
///
/// | key                                                 | default | meaning                      |
/// |-----------------------------------------------------|---------|------------------------------|
/// | `rate_limit_admission_burst`                        | 512     | admission tokens, full start |
/// | `rate_limit_admission_refill_interval_ms`           | 500     | ms per admission token       |
/// | `rate_limit_predecision_refusal_burst`              | 32      | refusal tokens, full start   |
/// | `rate_limit_predecision_refusal_refill_interval_ms` | 1000    | ms per refusal token         |
///
/// Zero is refused in every key: a zero burst throttles the first legitimate mint (or
/// suppresses the records of the first refusal), and a zero interval is an unbounded token
/// supply that silently disables the limiter. Why 512 and how to size it for another fleet:
/// [`sizing`](super::sizing).
///
/// Build one with struct-update syntax over the defaults, or load it from a `[registrar]`
/// TOML table (feature `config`). [`RegistrarConfig::validate`] says whether it can be used;
/// the profile's builder validates it again and refuses an invalid one.
///
/// ```
/// use admit::registrar::RegistrarConfig;
///
/// let config = RegistrarConfig {
///     rate_limit_admission_burst: 2_400, // 200 hosts × 12 modules
///     ..RegistrarConfig::default()
/// };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegistrarConfig {
    /// Admission tokens a bucket holds, and starts with. Default 512.
    pub rate_limit_admission_burst: u32,
    /// Milliseconds per admission token. Default 500 (two tokens a second).
    pub rate_limit_admission_refill_interval_ms: u32,
    /// Pre-derivation refusal tokens a bucket holds, and starts with. Default 32.
    pub rate_limit_predecision_refusal_burst: u32,
    /// Milliseconds per pre-derivation refusal token. Default 1000 (one token a second).
    pub rate_limit_predecision_refusal_refill_interval_ms: u32,
}

impl Default for RegistrarConfig {
    fn default() -> Self {
        Self {
            rate_limit_admission_burst: RateLimitKey::AdmissionBurst.default_value(),
            rate_limit_admission_refill_interval_ms: RateLimitKey::AdmissionRefillIntervalMs
                .default_value(),
            rate_limit_predecision_refusal_burst: RateLimitKey::PredecisionRefusalBurst
                .default_value(),
            rate_limit_predecision_refusal_refill_interval_ms:
                RateLimitKey::PredecisionRefusalRefillIntervalMs.default_value(),
        }
    }
}

impl RegistrarConfig {
    /// The value of `key`.
    pub fn get(&self, key: RateLimitKey) -> u32 {
        match key {
            RateLimitKey::AdmissionBurst => self.rate_limit_admission_burst,
            RateLimitKey::AdmissionRefillIntervalMs => self.rate_limit_admission_refill_interval_ms,
            RateLimitKey::PredecisionRefusalBurst => self.rate_limit_predecision_refusal_burst,
            RateLimitKey::PredecisionRefusalRefillIntervalMs => {
                self.rate_limit_predecision_refusal_refill_interval_ms
            }
        }
    }

    /// Sets `key` to `value` (unvalidated, like a field assignment).
    pub fn set(&mut self, key: RateLimitKey, value: u32) {
        let field = match key {
            RateLimitKey::AdmissionBurst => &mut self.rate_limit_admission_burst,
            RateLimitKey::AdmissionRefillIntervalMs => {
                &mut self.rate_limit_admission_refill_interval_ms
            }
            RateLimitKey::PredecisionRefusalBurst => &mut self.rate_limit_predecision_refusal_burst,
            RateLimitKey::PredecisionRefusalRefillIntervalMs => {
                &mut self.rate_limit_predecision_refusal_refill_interval_ms
            }
        };
        *field = value;
    }

    /// Checks every key: the first key (in [`RateLimitKey::ALL`] order) holding zero, else the
    /// first bucket whose burst × interval is too long to represent.
    pub fn validate(&self) -> Result<(), RegistrarConfigError> {
        for key in RateLimitKey::ALL {
            if self.get(key) == 0 {
                return Err(RegistrarConfigError::zero(key));
            }
        }
        for bucket in Bucket::ALL {
            self.bucket_config(bucket)?;
        }
        Ok(())
    }

    /// The validated token-bucket settings of `bucket`.
    pub fn bucket_config(&self, bucket: Bucket) -> Result<BucketConfig, RegistrarConfigError> {
        let [burst_key, interval_key] = RateLimitKey::of_bucket(bucket);
        let burst = self.get(burst_key);
        let refill_interval_ms = self.get(interval_key);
        BucketConfig::from_ms(burst, refill_interval_ms).map_err(|err| match err {
            BucketConfigError::ZeroBurst => RegistrarConfigError::zero(burst_key),
            BucketConfigError::ZeroRefillInterval => RegistrarConfigError::zero(interval_key),
            // from_ms only refuses zeros and a span too long; any other refusal would be a
            // span problem too, so it is reported as one rather than dropped.
            _ => RegistrarConfigError::RefillSpanTooLong {
                bucket,
                burst,
                refill_interval_ms,
            },
        })
    }
}

/// One of the four `rate_limit_*` keys.
///
/// ```
/// use admit::registrar::{RateLimitKey, RegistrarConfig};
///
/// let mut config = RegistrarConfig::default();
/// config.set(RateLimitKey::AdmissionBurst, 1_024);
/// assert_eq!(config.get(RateLimitKey::AdmissionBurst), 1_024);
/// for key in RateLimitKey::ALL {
///     println!("{key} = {} (default {})", config.get(key), key.default_value());
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RateLimitKey {
    /// `rate_limit_admission_burst`
    AdmissionBurst,
    /// `rate_limit_admission_refill_interval_ms`
    AdmissionRefillIntervalMs,
    /// `rate_limit_predecision_refusal_burst`
    PredecisionRefusalBurst,
    /// `rate_limit_predecision_refusal_refill_interval_ms`
    PredecisionRefusalRefillIntervalMs,
}

impl RateLimitKey {
    /// The four keys, in the order they are validated.
    pub const ALL: [RateLimitKey; 4] = [
        RateLimitKey::AdmissionBurst,
        RateLimitKey::AdmissionRefillIntervalMs,
        RateLimitKey::PredecisionRefusalBurst,
        RateLimitKey::PredecisionRefusalRefillIntervalMs,
    ];

    /// The key as written in the `[registrar]` table.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AdmissionBurst => "rate_limit_admission_burst",
            Self::AdmissionRefillIntervalMs => "rate_limit_admission_refill_interval_ms",
            Self::PredecisionRefusalBurst => "rate_limit_predecision_refusal_burst",
            Self::PredecisionRefusalRefillIntervalMs => {
                "rate_limit_predecision_refusal_refill_interval_ms"
            }
        }
    }

    /// The shipped default: 512, 500, 32 and 1000.
    pub const fn default_value(self) -> u32 {
        match self {
            // The reference bring-up wave: 64 hosts × 8 modules (see `sizing`).
            Self::AdmissionBurst => 512,
            // Two tokens a second sustained.
            Self::AdmissionRefillIntervalMs => 500,
            // Legitimate pre-derivation refusals are operator typos, one at a time.
            Self::PredecisionRefusalBurst => 32,
            // One token a second sustained.
            Self::PredecisionRefusalRefillIntervalMs => 1_000,
        }
    }

    /// The bucket this key configures.
    pub const fn bucket(self) -> Bucket {
        match self {
            Self::AdmissionBurst | Self::AdmissionRefillIntervalMs => Bucket::Admission,
            Self::PredecisionRefusalBurst | Self::PredecisionRefusalRefillIntervalMs => {
                Bucket::PredecisionRefusal
            }
        }
    }

    /// Whether this key is a burst (otherwise it is a refill interval).
    pub const fn is_burst(self) -> bool {
        matches!(self, Self::AdmissionBurst | Self::PredecisionRefusalBurst)
    }

    /// `[burst key, refill interval key]` of `bucket`.
    pub const fn of_bucket(bucket: Bucket) -> [RateLimitKey; 2] {
        match bucket {
            Bucket::Admission => [Self::AdmissionBurst, Self::AdmissionRefillIntervalMs],
            Bucket::PredecisionRefusal => [
                Self::PredecisionRefusalBurst,
                Self::PredecisionRefusalRefillIntervalMs,
            ],
        }
    }

    /// Why zero is refused for this key.
    fn zero_reason(self) -> &'static str {
        match (self.bucket(), self.is_burst()) {
            (Bucket::Admission, true) => {
                "a zero burst throttles the very first legitimate mint, so no bring-up could \
                 ever start"
            }
            (Bucket::PredecisionRefusal, true) => {
                "a zero burst suppresses the records of the very first refusal, so even a \
                 single operator typo would go unrecorded"
            }
            (_, false) => {
                "a zero refill interval is an unbounded token supply, which silently disables \
                 the limiter"
            }
        }
    }
}

impl fmt::Display for RateLimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong with a `rate_limit_*` value.
///
/// ```
/// use admit::registrar::{RegistrarConfig, RegistrarConfigError, ValueProblem};
///
/// let err = RegistrarConfig::from_toml_str("[registrar]\nrate_limit_admission_burst = -3\n")
///     .unwrap_err();
/// assert!(matches!(
///     err,
///     RegistrarConfigError::InvalidValue { problem: ValueProblem::Negative, .. }
/// ));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueProblem {
    /// Zero: refused, for the reason [`RegistrarConfigError`]'s message gives for that key.
    Zero,
    /// A negative integer.
    Negative,
    /// An integer above `u32::MAX` (4294967295).
    TooLarge,
    /// Not an integer at all.
    NotAnInteger {
        /// What it is instead, as TOML names it: `float`, `string`, `boolean`, `datetime`,
        /// `array` or `table`.
        found: &'static str,
    },
}

/// Why the registrar's rate-limit configuration was refused. Every message names the key (or
/// the file) to change and says why.
///
/// ```
/// use admit::registrar::{RateLimitKey, RegistrarConfig};
///
/// let mut config = RegistrarConfig::default();
/// config.rate_limit_admission_refill_interval_ms = 0;
/// let err = config.validate().unwrap_err();
/// assert_eq!(err.key(), Some(RateLimitKey::AdmissionRefillIntervalMs));
/// println!("{err}"); // names the key and says why 0 is refused
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistrarConfigError {
    /// A key's value is not a whole number from 1 to 4294967295.
    InvalidValue {
        /// The key.
        key: RateLimitKey,
        /// The value as written.
        found: String,
        /// What is wrong with it.
        problem: ValueProblem,
    },
    /// A bucket's burst × refill interval is longer than any bucket can represent (about 34
    /// years to refill from empty).
    RefillSpanTooLong {
        /// The bucket whose two keys are to blame.
        bucket: Bucket,
        /// Its burst.
        burst: u32,
        /// Its refill interval in milliseconds.
        refill_interval_ms: u32,
    },
    /// The document's `registrar` entry is not a table (TOML loading, feature `config`).
    NotATable {
        /// What it is instead, as TOML names it.
        found: &'static str,
    },
    /// The document is not valid TOML (TOML loading, feature `config`).
    Syntax {
        /// The parser's message, with line and column.
        message: String,
    },
    /// The configuration file could not be read (TOML loading, feature `config`).
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

impl RegistrarConfigError {
    fn zero(key: RateLimitKey) -> Self {
        Self::InvalidValue {
            key,
            found: "0".to_owned(),
            problem: ValueProblem::Zero,
        }
    }

    /// The key to change, when one key is to blame.
    pub fn key(&self) -> Option<RateLimitKey> {
        match self {
            Self::InvalidValue { key, .. } => Some(*key),
            _ => None,
        }
    }
}

impl fmt::Display for RegistrarConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidValue {
                key,
                found,
                problem,
            } => {
                write!(f, "[registrar] {key} = {found} is refused: ")?;
                match problem {
                    ValueProblem::Zero => f.write_str(key.zero_reason())?,
                    ValueProblem::Negative => f.write_str("it is negative")?,
                    ValueProblem::TooLarge => {
                        f.write_str("it is above 4294967295, the largest value the key holds")?;
                    }
                    ValueProblem::NotAnInteger { found } => write!(
                        f,
                        "it is a {found}, not a whole number (no fraction, no quotes: the \
                         configuration holds no floating-point value)"
                    )?,
                }
                write!(
                    f,
                    "; set a whole number from 1 to 4294967295 (default {})",
                    key.default_value()
                )
            }
            Self::RefillSpanTooLong {
                bucket,
                burst,
                refill_interval_ms,
            } => {
                let [burst_key, interval_key] = RateLimitKey::of_bucket(*bucket);
                write!(
                    f,
                    "[registrar] {burst_key} × {interval_key} = {burst} × {refill_interval_ms} \
                     ms is refused: an empty {bucket} bucket would take more than {} ms (about \
                     34 years) to refill; lower one of the two",
                    BucketConfig::MAX_REFILL_SPAN.as_millis()
                )
            }
            Self::NotATable { found } => write!(
                f,
                "`registrar` is a {found}; it must be a table (`[registrar]`) holding the \
                 rate_limit_* keys"
            ),
            Self::Syntax { message } => write!(f, "the configuration is not valid TOML: {message}"),
            Self::Read { path, message } => {
                write!(
                    f,
                    "cannot read the configuration {}: {message}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for RegistrarConfigError {}
