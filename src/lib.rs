//! Lock-free admission control for servers whose work funnels through one writer.
//!
//! `admit` decides, in a few atomic operations and without ever taking a lock, whether one
//! actor's next operation may go in, so that one actor's flood is never paid for by everyone
//! else, and so that memory stays bounded whatever names the clients invent.
//!
//! * [`bucket`]: a token bucket in one `AtomicU64`, the brick the other primitives share.
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
pub mod quota;
mod sync;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod check;

pub use bucket::{BucketConfig, BucketConfigError, Empty, TakeError, TokenBucket};
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use quota::{Quota, QuotaConfigError, QuotaExceeded, QuotaLimit, QuotaUsage, RateLimit};
