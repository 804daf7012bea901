//! The token-bucket arithmetic, as pure functions over one number.
//!
//! A bucket's whole state is one instant, `full_at`: the tick at which the bucket is (or was)
//! back to a full burst. Tokens are not stored; they are derived. With burst `B` and refill
//! interval `T` (both in ticks, a tick being one millisecond):
//!
//! ```text
//! tokens(now) = B                               if full_at <= now
//!             = B - ceil((full_at - now) / T)   otherwise
//! ```
//!
//! Taking `n` tokens moves `full_at` to `max(full_at, now) + n·T`, allowed only while the
//! result is at most `now + B·T` (the bucket cannot owe more than a full burst). This is the
//! generic cell rate algorithm in its virtual-scheduling form. Every rule the crate promises
//! follows from it without a second field to keep consistent:
//!
//! * **No drift.** Fractions of a token are the sub-interval part of `full_at - now`, never
//!   rounded away, so N whole intervals always yield exactly N tokens.
//! * **An earlier reading never mints.** `tokens(now)` is non-decreasing in `now`, and the
//!   admission test compares against `now + B·T`, so a reading older than one already used
//!   (a clock step back, or a racing thread holding an older reading) sees at most as many
//!   tokens, never more. Summed over any history, grants never exceed
//!   `B + (latest reading − creation) / T` plus refunds.
//! * **At most `B + ⌊(b − a) / T⌋` grants at ticks within `[a, b]`**, in any order, absent
//!   refunds. The first of them (in the order they are taken) leaves `full_at ≥ a + T`, each
//!   later one adds at least `T`, so after the `k`-th, `full_at ≥ a + k·T`; the `k`-th was
//!   admitted at a tick `≤ b` only if `full_at − tick ≤ B·T`, so `a + k·T − b ≤ B·T`. In
//!   nanosecond readings: readings within `[r, r + L]` fall in ticks spanning at most
//!   `⌈L / 1 ms⌉ = ⌊(L + 999,999) / 1 ms⌋` ticks, and `⌊⌊x / 1 ms⌋ / T⌋ = ⌊x / (1 ms · T)⌋`,
//!   so at most `B + ⌊(L + 999,999 ns) / interval_ns⌋` grants (see "Bounds in readings" in
//!   the [bucket docs](super)).
//! * **No second burst at a boundary.** Draining sets `full_at = now + B·T`; the next token is
//!   one whole interval away, whatever the phase of `now`.
//! * **Full is a comparison.** `full_at <= now` needs no configuration, which is what lets the
//!   entry table reclaim full buckets without knowing whose they are.
//!
//! # Ticks and the time budget
//!
//! Time is counted in milliseconds since the clock's origin (readings are floored), matching
//! the configuration unit. `full_at` lives in [`TIME_BITS`] = 42 bits, so that a table slot
//! can pack it beside an identity fingerprint. With a refill span of at most
//! [`MAX_SPAN_TICKS`] (2^40 ms), `full_at <= now + span < 2^42` holds for every reading up to
//! [`MAX_NOW_TICK`] = 3·2^40 ms, about 104 years of process uptime. A reading beyond that is
//! clamped to it: buckets then stop refilling rather than wrapping.

use super::config::BucketConfig;
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
/// `full_at` of a bucket that has never been charged: full at every reading.
pub(crate) const FRESH: u64 = 0;

const _: () = assert!(MAX_NOW_TICK + MAX_SPAN_TICKS <= TIME_MASK);

/// A reading in nanoseconds, floored to ticks and clamped to [`MAX_NOW_TICK`].
#[inline]
pub(crate) fn tick_of(now_ns: u64) -> u64 {
    (now_ns / TICK_NS).min(MAX_NOW_TICK)
}

/// Why a take was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not enough tokens yet; the take succeeds from this tick on (absent other takes).
    Empty { ready_tick: u64 },
    /// `n` exceeds the burst: no amount of waiting helps.
    ExceedsBurst,
}

/// Takes `n` tokens from a bucket in state `full_at` at tick `now`; returns the new state.
///
/// `n == 0` always succeeds and changes nothing.
#[inline]
pub(crate) fn take(cfg: &BucketConfig, full_at: u64, now: u64, n: u32) -> Result<u64, Refusal> {
    if n == 0 {
        return Ok(full_at);
    }
    if n > cfg.burst() {
        return Err(Refusal::ExceedsBurst);
    }
    let cost = u64::from(n) * cfg.interval_ticks();
    let next = full_at.max(now) + cost;
    if next - now <= cfg.span_ticks() {
        Ok(next)
    } else {
        // Here full_at > now (a full bucket can always pay n <= burst), so the take succeeds
        // from the tick at which next - tick == span.
        Err(Refusal::Empty {
            ready_tick: next - cfg.span_ticks(),
        })
    }
}

/// Whole tokens held at tick `now`, `0..=burst`.
pub(crate) fn available(cfg: &BucketConfig, full_at: u64, now: u64) -> u32 {
    if full_at <= now {
        return cfg.burst();
    }
    let missing = (full_at - now).div_ceil(cfg.interval_ticks());
    let missing = u32::try_from(missing).unwrap_or(u32::MAX);
    cfg.burst().saturating_sub(missing)
}

/// First tick from which `n` tokens can be taken, or `ExceedsBurst`.
pub(crate) fn ready_tick(
    cfg: &BucketConfig,
    full_at: u64,
    now: u64,
    n: u32,
) -> Result<u64, Refusal> {
    match take(cfg, full_at, now, n) {
        Ok(_) => Ok(now),
        Err(Refusal::Empty { ready_tick }) => Ok(ready_tick),
        Err(Refusal::ExceedsBurst) => Err(Refusal::ExceedsBurst),
    }
}

/// Gives `n` tokens back at tick `now`; never above the burst.
pub(crate) fn refund(cfg: &BucketConfig, full_at: u64, now: u64, n: u32) -> u64 {
    if full_at <= now {
        return full_at;
    }
    let credit = u64::from(n) * cfg.interval_ticks();
    full_at.saturating_sub(credit).max(now)
}

/// Whether the bucket holds its full burst at tick `now`.
pub(crate) fn is_full(full_at: u64, now: u64) -> bool {
    full_at <= now
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

    fn cfg(burst: u32, interval_ms: u32) -> BucketConfig {
        BucketConfig::from_ms(burst, interval_ms).unwrap()
    }

    #[test]
    fn full_bucket_pays_any_n_up_to_burst() {
        let c = cfg(4, 10);
        assert_eq!(take(&c, FRESH, 100, 4), Ok(140));
        assert_eq!(take(&c, FRESH, 100, 5), Err(Refusal::ExceedsBurst));
        assert_eq!(take(&c, FRESH, 100, 0), Ok(FRESH));
    }

    #[test]
    fn available_counts_whole_tokens_only() {
        let c = cfg(4, 10);
        // Drained at 100: full_at = 140.
        assert_eq!(available(&c, 140, 100), 0);
        assert_eq!(available(&c, 140, 109), 0);
        assert_eq!(available(&c, 140, 110), 1);
        assert_eq!(available(&c, 140, 139), 3);
        assert_eq!(available(&c, 140, 140), 4);
        // A stale reading far behind never underflows.
        assert_eq!(available(&c, 140, 0), 0);
    }

    #[test]
    fn refusal_names_the_first_tick_that_succeeds() {
        let c = cfg(4, 10);
        assert_eq!(
            take(&c, 140, 100, 1),
            Err(Refusal::Empty { ready_tick: 110 })
        );
        assert_eq!(take(&c, 140, 110, 1), Ok(150));
        assert_eq!(
            take(&c, 140, 100, 3),
            Err(Refusal::Empty { ready_tick: 130 })
        );
    }

    #[test]
    fn refund_never_exceeds_burst() {
        let c = cfg(4, 10);
        assert_eq!(refund(&c, 140, 100, 1), 130);
        assert_eq!(refund(&c, 140, 100, 100), 100);
        assert_eq!(refund(&c, 90, 100, 3), 90);
        assert_eq!(available(&c, refund(&c, 140, 100, 100), 100), 4);
    }

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
