//! The time kernel: readings in nanoseconds become ticks, the one unit every decision is made
//! in, and ticks become the waits callers are told.
//!
//! It sits below everything that decides: the token-bucket arithmetic (`bucket::gcra`), the
//! entry table's word layout and the limiter's reclaim hint all import their time from here,
//! and nothing here imports from them.
//!
//! Time is counted in milliseconds since the clock's origin (readings are floored), matching
//! the configuration unit. `full_at` lives in [`TIME_BITS`] = 42 bits, so that a table slot
//! can pack it beside an identity fingerprint. With a refill span of at most
//! [`MAX_SPAN_TICKS`] (2^40 ms), `full_at <= now + span < 2^42` holds for every reading up to
//! [`MAX_NOW_TICK`] = 3·2^40 ms, about 104 years of process uptime. A reading beyond that is
//! clamped to it: buckets then stop refilling rather than wrapping.

use std::time::Duration;

/// Nanoseconds per tick.
pub(crate) const TICK_NS: u64 = 1_000_000;
/// Width of the `full_at` field.
pub(crate) const TIME_BITS: u32 = 42;
/// Mask of the `full_at` field.
pub(crate) const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
/// Largest refill span, `burst × interval`, in ticks: 2^40 ms, about 34.8 years.
pub(crate) const MAX_SPAN_TICKS: u64 = 1 << 40;
/// Latest tick the arithmetic accepts; later readings are clamped to it. `MAX_NOW_TICK +
/// MAX_SPAN_TICKS` still fits [`TIME_MASK`], so `full_at` can never leave its field.
pub(crate) const MAX_NOW_TICK: u64 = TIME_MASK - MAX_SPAN_TICKS;

const _: () = assert!(MAX_NOW_TICK + MAX_SPAN_TICKS <= TIME_MASK);

/// A reading in nanoseconds, floored to ticks and clamped to [`MAX_NOW_TICK`].
#[inline]
pub(crate) fn tick_of(now_ns: u64) -> u64 {
    (now_ns / TICK_NS).min(MAX_NOW_TICK)
}

/// The exact time from `now_ns` until tick `ready_tick` begins; at least one nanosecond
/// whenever `ready_tick` lies after the reading's tick.
pub(crate) fn wait_until(ready_tick: u64, now_ns: u64) -> Duration {
    let ready_ns = ready_tick.saturating_mul(TICK_NS);
    // A reading clamped at MAX_NOW_TICK would otherwise report no wait for a bucket that no
    // longer refills; report one tick instead of zero so a refusal never says "retry now".
    let wait = match ready_ns.checked_sub(now_ns) {
        Some(0) | None => TICK_NS,
        Some(w) => w,
    };
    Duration::from_nanos(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_floored_and_clamped() {
        assert_eq!(tick_of(1_999_999), 1);
        assert_eq!(tick_of(u64::MAX), MAX_NOW_TICK);
    }

    #[test]
    fn wait_is_exact_and_never_zero() {
        assert_eq!(wait_until(5, 4_000_001), Duration::from_nanos(999_999));
        assert_eq!(wait_until(5, 5_000_000), Duration::from_millis(1));
    }
}
