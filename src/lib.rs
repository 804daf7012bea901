//! Lock-free admission control for servers whose work funnels through one writer.
//!
//! `admit` decides, in a few atomic operations and without ever taking a lock, whether one
//! actor's next operation may go in, so that one actor's flood is never paid for by everyone
//! else, and so that memory stays bounded whatever names the clients invent.
//!
//! * [`bucket`]: a token bucket in one `AtomicU64`, the brick the other primitives share.
//! * [`fairness`]: per-actor in-flight quotas in front of a single writer: with quota Q, an op
//!   waits behind at most Q ops of any one other actor; over the quota, an immediate rejection.
//! * [`limiter`]: keyed token buckets in a bounded, lock-free entry table; when the table is
//!   full of drained entries, charges land on per-class overflow buckets, never unlimited.
//! * [`registrar`]: a ready profile over the limiter for a registrar's verb layer: two
//!   buckets per (identity, verb) charged at its two check points, the typed retryable
//!   throttle, the limited-invocation sink, and the four `rate_limit_*` keys.
//! * [`clock`]: the injected monotonic clock every decision reads; every time-dependent call
//!   also has an `_at(now)` form so a writer deciding a batch reads the clock once.
//! * [`quota`]: per-actor volume quotas (events and bytes per window) in a fixed array of
//!   hashed `AtomicU32` counters, on by default through [`RateLimit::default`].
//!
//! No `unsafe` code, no allocation after construction on any decision path, and no wall clock
//! anywhere.

#![forbid(unsafe_code)]

pub mod bucket;
pub mod clock;
mod entropy;
pub mod fairness;
pub mod implementation;
pub mod limiter;
pub mod quota;
pub mod registrar;
mod sync;
mod table;

#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod check;
#[cfg(test)]
mod tests;

pub use bucket::{BucketConfig, BucketConfigError, Empty, TakeError, TokenBucket};
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use fairness::{OwnedPermit, Permit, Quotas};
pub use limiter::{Denied, Grant, Limited, Limiter, LimiterBuilder, LimiterError, DEFAULT_CAP};
pub use quota::{Quota, RateLimit};
pub use registrar::{
    CountingSink, LimitedSink, RegistrarConfig, RegistrarError, RegistrarLimiter, RetryAfter, Verb,
};
