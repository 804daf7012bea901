//! The token-bucket arithmetic, as pure functions over one number.
//!
//! A bucket's whole state is one instant, `full_at`: the tick at which the bucket is (or was)
//! back to a full burst. Tokens are not stored; they are derived. With burst `B` and refill
//! interval `T` (both in ticks of the config's unit, a millisecond or a microsecond):
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
//! Time enters only as ticks ([`crate::clock::tick`]): the functions here never see a
//! nanosecond, except [`take_at`] and [`peek_at`], which turn a tick into the wait a caller is
//! told. Both a standalone [`TokenBucket`](super::TokenBucket) and a table entry of the
//! limiter decide through [`take_at`] and report through [`peek_at`]: one bucket in a word,
//! one API.

use super::config::BucketConfig;
use super::error::{BucketRefused, Empty};
use std::time::Duration;

/// `full_at` of a bucket that has never been charged: full at every reading.
pub(crate) const FRESH: u64 = 0;

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

/// Debits `n` tokens from a bucket in state `full_at` at tick `now`, whatever it holds: for
/// work already done, charged by its outcome. The new state moves only later, never earlier:
/// `max(full_at, now) + n·T`, at most `now + longest` (callers pass the burst's span: an
/// empty bucket) unless `full_at` is already past that. Returns the new state and whether the
/// debit was cut there (the rest is forgiven, and the caller says so).
#[inline]
pub(crate) fn owe(cfg: &BucketConfig, full_at: u64, now: u64, n: u32, longest: u64) -> (u64, bool) {
    let cost = u64::from(n).saturating_mul(cfg.interval_ticks());
    let owed = full_at.max(now).saturating_add(cost);
    let most = full_at.max(now.saturating_add(longest));
    (owed.min(most), owed > most)
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

/// The state `full_at` of a bucket counted under `old`, carried over to `new` at tick `now`
/// (a change of limits at runtime, see "Limits changed at runtime" in the
/// [bucket docs](super)): the tokens owed carry over, fractions included, and nothing is
/// forgiven. The time still owed, `x = full_at − now`, becomes `⌈x · T′ / T⌉`, so the tokens
/// owed, `x / T`, are the same before and after (rounded up to a tick, never down), whatever
/// the new burst: a debt above a full new burst is kept, and repaid at the new rate before the
/// bucket holds a token again. So a cut and its revert at one reading leave at least the debt
/// the bucket had (`⌈⌈x·r⌉ / r⌉ ≥ x`).
///
/// The time owed never exceeds the unit's longest span ([`Tick::max_span`]: 2^40 ms, about
/// 34.8 years, or 2^38 µs, about 3.18 days), which is what keeps `full_at` inside its field;
/// a debt that would exceed it would be cut to it. No change a bucket or a limiter accepts
/// reaches that cut: one that could is refused from its configs (`bucket::debt`), and the
/// callers convert through [`convert_within`]; the cut only keeps the field whatever the
/// arguments.
///
/// A full bucket (`full_at <= now`) is left as it is, and so is any bucket when the interval
/// does not change. The result is at most `now + Tick::max_span`.
///
/// [`Tick::max_span`]: crate::clock::tick::Tick::max_span
pub(crate) fn convert(old: &BucketConfig, new: &BucketConfig, full_at: u64, now: u64) -> u64 {
    let (t, t_new) = (old.interval_ticks(), new.interval_ticks());
    if full_at <= now || t == t_new {
        return full_at;
    }
    let owed = full_at - now;
    let scaled = (u128::from(owed) * u128::from(t_new)).div_ceil(u128::from(t));
    let most = new.tick().max_span();
    let carried = u64::try_from(scaled).map_or(most, |scaled| scaled.min(most));
    now + carried
}

/// [`convert`] for a bucket whose debt is at most `longest` ticks at the reading of any take
/// that left it (see `bucket::debt`): a debt longer than that at `now` was left by a take at a
/// later reading than `now` (a change counted at a lagging reading), and is carried from
/// the instant `full_at − longest` at which it was `longest`, no later than that take's
/// reading. So no carried debt exceeds `⌈longest · T′ / T⌉`, which an accepted change keeps
/// within the unit's longest span, and a slower rate counted there owes no less than counted at
/// the take's reading.
pub(crate) fn convert_within(
    old: &BucketConfig,
    new: &BucketConfig,
    full_at: u64,
    now: u64,
    longest: u64,
) -> u64 {
    convert(old, new, full_at, now.max(full_at.saturating_sub(longest)))
}

/// Whether a change from `old` to `new` makes the rate faster: then the reading it is
/// counted at must be no earlier than any reading a take of the bucket used (a debt counted
/// from an earlier reading would be repaid at the faster rate over time the old rate already
/// counted), so callers move it up to the latest such reading they know.
#[inline]
pub(crate) fn is_faster(old: &BucketConfig, new: &BucketConfig) -> bool {
    new.interval_ticks() < old.interval_ticks()
}

/// Whether the bucket holds its full burst at tick `now`.
pub(crate) fn is_full(full_at: u64, now: u64) -> bool {
    full_at <= now
}

/// Takes `n` tokens from a bucket in state `full_at` at reading `now_ns`: the new state, or
/// the refusal a caller is given (with its exact wait).
#[inline]
pub(crate) fn take_at(
    cfg: &BucketConfig,
    full_at: u64,
    n: u32,
    now_ns: u64,
) -> Result<u64, BucketRefused> {
    take(cfg, full_at, cfg.tick().of(now_ns), n).map_err(|refusal| refused(cfg, refusal, n, now_ns))
}

/// The refusal a caller is given for a take of `n` refused at reading `now_ns`. A caller that
/// keeps the compact [`Refusal`] through a CAS loop (the limiter's entries) turns it into the
/// public one here, after the loop, exactly as [`take_at`] does.
#[cold]
pub(crate) fn refused(cfg: &BucketConfig, refusal: Refusal, n: u32, now_ns: u64) -> BucketRefused {
    match refusal {
        Refusal::Empty { ready_tick } => BucketRefused::Empty(Empty::of_nanos(
            cfg.tick().wait_ns_until(ready_tick, now_ns),
        )),
        Refusal::ExceedsBurst => BucketRefused::ExceedsBurst {
            requested: n,
            burst: cfg.burst(),
        },
    }
}

/// What taking `n` tokens from a bucket in state `full_at` would see at reading `now_ns`,
/// taking nothing: the whole tokens held, and how long until `n` can be taken (zero if now;
/// zero too if `n` exceeds the burst, which no wait helps).
pub(crate) fn peek_at(cfg: &BucketConfig, full_at: u64, n: u32, now_ns: u64) -> (u32, Duration) {
    let now = cfg.tick().of(now_ns);
    let ready = ready_tick(cfg, full_at, now, n).unwrap_or(now);
    let wait = if ready <= now {
        Duration::ZERO
    } else {
        cfg.tick().wait_until(ready, now_ns)
    };
    (available(cfg, full_at, now), wait)
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
    fn convert_carries_the_tokens_owed_over() {
        // 100/s with burst 100, drained at 0 ms: owes 1,000 ms, 100 tokens.
        let fast = cfg(100, 10);
        let drained = take(&fast, FRESH, 0, 100).unwrap();
        assert_eq!(drained, 1_000);
        // Cut to 1/s: 100 tokens owed are 100 s.
        let slow = cfg(100, 1_000);
        assert_eq!(convert(&fast, &slow, drained, 0), 100_000);
        assert_eq!(available(&slow, convert(&fast, &slow, drained, 0), 0), 0);
        // Burst 10 at 1/s: still 100 tokens, 100 s: a debt above the new burst is kept.
        let small = cfg(10, 1_000);
        assert_eq!(convert(&fast, &small, drained, 0), 100_000);
        // And the revert carries the same 100 tokens back: nothing forgiven.
        assert_eq!(convert(&small, &fast, 100_000, 0), drained);
        // A fraction carries: 15 ms owed at 10 ms per token is 1.5 tokens, 1,500 ms at 1/s.
        assert_eq!(convert(&fast, &slow, 15, 0), 1_500);
        assert_eq!(available(&fast, 15, 0), 98);
        assert_eq!(available(&slow, 1_500, 0), 98);
        // Faster: 1,000 ms owed at 10 ms per token is 100 tokens, 100 ms at 1 ms per token.
        assert_eq!(convert(&fast, &cfg(100, 1), drained, 0), 100);
        // Full, or the same interval: unchanged (a lower burst keeps the whole debt).
        assert_eq!(convert(&fast, &slow, drained, 1_000), 1_000);
        assert_eq!(convert(&fast, &cfg(3, 10), drained, 0), 1_000);
        // Slower: the 100 tokens owed are 2 s at 20 ms, whatever the new burst.
        assert_eq!(convert(&fast, &cfg(1, 20), drained, 0), 2_000);
    }

    #[test]
    fn convert_never_leaves_the_time_field() {
        let tiny = BucketConfig::from_ms(u32::MAX, 1).unwrap();
        let huge = BucketConfig::from_ms(1, u32::MAX).unwrap();
        let now = crate::clock::tick::MAX_NOW_TICK;
        let drained = take(&tiny, FRESH, now, u32::MAX).unwrap();
        let carried = convert(&tiny, &huge, drained, now);
        assert_eq!(
            carried,
            now + crate::clock::tick::MAX_SPAN_TICKS,
            "cut to the unit's longest span"
        );
        assert!(carried <= crate::clock::tick::TIME_MASK);
    }
}
