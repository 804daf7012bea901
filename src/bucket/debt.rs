//! The longest debt a bucket may owe, counted from its configs alone, and the change it
//! refuses: one whose carried debt would not fit the unit's longest span.
//!
//! A change carries a debt of `x` ticks at interval `T` over as `⌈x · T′ / T⌉` ticks at `T′`
//! (`gcra::convert`). A debt never exceeds `D`, defined from the configs in force since the
//! bucket was built: `D₀ = B₀ · T₀`, and at each change `D′ = max(⌈D · T′ / T⌉, B′ · T′)`. By
//! induction: a take leaves at most `B · T` owed (its admission test), time only lowers a debt,
//! and a change carries `x ≤ D` to `⌈x · T′ / T⌉ ≤ ⌈D · T′ / T⌉`. So a change with
//! `⌈D · T′ / T⌉` within the unit's longest span (2^40 ms, or 2^38 µs) never cuts a debt, and
//! one beyond it is refused before anything is applied, decided from the configs alone: no
//! entry is read, so a check ([`TokenBucket::check_config`](super::TokenBucket::check_config),
//! [`Limiter::check_config`](crate::Limiter::check_config)) answers exactly what the change
//! will. `D` never decays with time: it bounds every debt the history of configs allows.
//!
//! # Invariants
//!
//! 1. **No accepted change cuts a debt**: every debt is at most `D`, and an accepted change
//!    carries `D` within the unit's longest span (`a_change_that_would_cut_a_debt_is_refused`,
//!    in `bucket::reconfig_tests`; the reference models assert that no accepted change cuts).
//! 2. **A refusal changes nothing**, `D` included.

use super::config::BucketConfig;

/// `D` after a change from `old` to `new`, given `D` (`longest`, in ticks) before it; or the
/// debt, in ticks, that the change would carry beyond the unit's longest span.
pub(crate) fn after_change(
    longest: u64,
    old: &BucketConfig,
    new: &BucketConfig,
) -> Result<u64, u128> {
    let (t, t_new) = (old.interval_ticks(), new.interval_ticks());
    let carried = if t == t_new {
        u128::from(longest)
    } else {
        (u128::from(longest) * u128::from(t_new)).div_ceil(u128::from(t.max(1)))
    };
    let most = new.tick().max_span();
    match u64::try_from(carried) {
        Ok(carried) if carried <= most => Ok(carried.max(new.span_ticks())),
        _ => Err(carried),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_longest_debt_follows_the_configs() {
        let fast = BucketConfig::per_second(100).unwrap(); // burst 100, 10 ms: D = 1 s
        let slow = BucketConfig::per_second(1).unwrap().with_burst(1).unwrap();
        let d = fast.span_ticks();
        assert_eq!(d, 1_000);
        // Cut to 1 per second: 100 tokens owed are 100 s; reverted: 1 s again.
        let cut = after_change(d, &fast, &slow).unwrap();
        assert_eq!(cut, 100_000);
        assert_eq!(after_change(cut, &slow, &fast), Ok(1_000));
        // Microseconds: a burst of 100,000 at 10 µs (1 s owed) cut to one per 10 s owes
        // 10^6 s, beyond 2^38 µs: refused.
        let fine = BucketConfig::new(100_000, Duration::from_micros(10)).unwrap();
        let slowest = BucketConfig::new(1, Duration::from_secs(10))
            .unwrap()
            .in_unit(fine.tick())
            .unwrap();
        assert_eq!(
            after_change(fine.span_ticks(), &fine, &slowest),
            Err(1_000_000_000_000)
        );
    }
}
