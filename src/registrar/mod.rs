//! The registrar profile: two token buckets per (client identity, verb), charged at the two
//! check points of a registrar verb layer, before any durable write.

mod bucket;
mod outcome;

pub use bucket::Bucket;
pub use outcome::{MismatchCause, RegistrarError, RetryAfter, UnavailableReason};
