//! The registrar profile: two token buckets per (client identity, verb), charged at the two
//! check points of a registrar verb layer, before any durable write.

mod bucket;
mod config;
mod outcome;
pub mod sizing;

pub use bucket::Bucket;
#[cfg(feature = "config")]
pub use config::LoadedRegistrar;
pub use config::{ConfigError, RateLimitKey, RegistrarConfig, ValueProblem};
pub use outcome::{MismatchCause, RegistrarError, RetryAfter, UnavailableReason};
pub use sizing::{size_wave, WaveSizing};
