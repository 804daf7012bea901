//! Where a class change is counted (`reconfig.rs`, "Where a change is counted"): a change to
//! a faster rate preempted between its clock read and its publication, and a change made
//! after the clock went back. Zero extra tokens in every case.

use super::Limiter;
use crate::bucket::BucketConfig;
use crate::clock::{Clock, ManualClock};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// A manual clock that runs a decision inside one of its readings: the reading returned is the
/// time before the decision, and the clock has moved `lag` on by the time it returns. A
/// limiter change that reads it is preempted, after its read, by a decision `lag` later.
#[derive(Clone)]
struct PreemptingClock {
    time: ManualClock,
    /// Which reading (counting from 1) runs the decision; 0: none.
    at_reading: Arc<Mutex<(u32, u32)>>,
    lag: u64,
    decision: Arc<OnceLock<Box<dyn Fn() + Send + Sync>>>,
}

impl Clock for PreemptingClock {
    fn now_ns(&self) -> u64 {
        let reading = self.time.now_ns();
        let run = {
            let mut guard = self.at_reading.lock().unwrap();
            let (count, target) = &mut *guard;
            *count += 1;
            *count == *target
        };
        if run {
            self.time.advance_ns(self.lag);
            if let Some(decide) = self.decision.get() {
                decide();
            }
        }
        reading
    }
}

/// The measurement: a class of `burst` per `from` (in microseconds), an actor drained
/// by a decision that runs `lag_ns` after the reading number `preempt_at` of a change to one
/// per `to`, before the change publishes. Returns the tokens the actor is granted at the
/// clock's reading right after the change (a drained actor holds none), or `None` if the
/// change made fewer than `preempt_at` readings.
fn extra_after_a_preempted_change(
    burst: u32,
    from: Duration,
    to: Duration,
    lag_ns: u64,
    preempt_at: u32,
) -> Option<u32> {
    let decision: Arc<OnceLock<Box<dyn Fn() + Send + Sync>>> = Arc::new(OnceLock::new());
    let clock = PreemptingClock {
        time: ManualClock::starting_at(1_000 * MS),
        at_reading: Arc::new(Mutex::new((0, 0))),
        lag: lag_ns,
        decision: decision.clone(),
    };
    let limiter = Arc::new(
        Limiter::builder()
            .build_with_clock([BucketConfig::new(burst, from).unwrap()], clock.clone())
            .unwrap(),
    );
    let drained = Arc::new(Mutex::new(None));
    {
        let (limiter, drained) = (Arc::downgrade(&limiter), drained.clone());
        let _ = decision.set(Box::new(move || {
            if let Some(limiter) = limiter.upgrade() {
                *drained.lock().unwrap() = Some(limiter.try_acquire_n("alice", 0, burst).is_ok());
            }
        }));
    }
    *clock.at_reading.lock().unwrap() = (0, preempt_at);
    limiter
        .set_config(0, BucketConfig::new(burst, to).unwrap())
        .unwrap();
    // The change made fewer readings than `preempt_at`: nothing preempted it.
    let drained = (*drained.lock().unwrap())?;
    assert!(drained, "the preempting decision drained alice");
    let mut extra = 0;
    while extra < burst && limiter.try_acquire("alice", 0).is_ok() {
        extra += 1;
    }
    // Once her debt is repaid at the new rate she is served again: the change did apply.
    clock.time.advance_ns(1_000 * MS);
    assert!(limiter.try_acquire_n("alice", 0, burst).is_ok());
    Some(extra)
}

/// [`extra_after_a_preempted_change`] for a burst of 100 from one per `from` to one per `to`,
/// preempted after each of the change's first three readings by each of `lags` (in units of
/// `unit` nanoseconds): `(reading, lag, tokens back)` for every preemption that happened.
fn tokens_back(from: Duration, to: Duration, lags: &[u64], unit: u64) -> Vec<(u32, u64, u32)> {
    let mut back = Vec::new();
    for preempt_at in 1..=3 {
        for &lag in lags {
            if let Some(extra) =
                extra_after_a_preempted_change(100, from, to, lag * unit, preempt_at)
            {
                back.push((preempt_at, lag, extra));
            }
        }
    }
    back
}

/// 10,000/s with a burst of 100 raised to 100,000/s (microseconds), a decision draining an
/// actor under the old class word at 1.1 to 50 ms after the change's clock read, landing
/// before the change publishes: counted at its read plus the 1 ms tolerance, the change gave
/// 9, 45, 90 and 100 tokens back at once. Whichever of the change's readings the decision
/// follows, it gets none.
#[test]
fn a_faster_change_preempted_after_its_read_gives_nothing_back() {
    let lags_us = [1_100, 1_500, 2_000, 2_200, 5_000, 50_000];
    let back = tokens_back(
        Duration::from_micros(100),
        Duration::from_micros(10),
        &lags_us,
        US,
    );
    assert!(
        back.iter().all(|&(_, _, extra)| extra == 0),
        "(reading preempted after, lag µs, tokens back): {back:?}"
    );
}

/// The same in milliseconds: 100/s raised to 1,000/s, preempted 3 to 120 ms (1, 9, 44 and 100
/// tokens back when counted at the read plus the tolerance).
#[test]
fn a_faster_millisecond_change_preempted_after_its_read_gives_nothing_back() {
    let lags_ms = [3, 11, 50, 120];
    let back = tokens_back(
        Duration::from_millis(10),
        Duration::from_millis(1),
        &lags_ms,
        MS,
    );
    assert!(
        back.iter().all(|&(_, _, extra)| extra == 0),
        "(reading preempted after, lag ms, tokens back): {back:?}"
    );
}

/// A clock gone back (10 s, then 0) and a change to a faster rate: counted at the backwards
/// reading, the change repaid at 1 per ms the 10 s the old rate already counted, and all ten
/// tokens of a drained actor came back at 10 s. Counted at the horizon (the highest reading
/// the limiter admitted decisions at), it gives none, at 0 or at 10 s.
#[test]
fn a_faster_change_after_the_clock_went_back_gives_nothing_back() {
    let clock = ManualClock::starting_at(10_000 * MS);
    let limiter = Limiter::builder()
        .build_with_clock(
            [BucketConfig::per_second(1).unwrap().with_burst(10).unwrap()],
            clock.clone(),
        )
        .unwrap();
    assert!(limiter.try_acquire_n_at("x", 0, 10, 10_000 * MS).is_ok());
    clock.set_ns(0);
    limiter
        .set_config(0, BucketConfig::new(10, Duration::from_millis(1)).unwrap())
        .unwrap();
    for reading in [10_000 * MS, 0] {
        let granted = (0..10)
            .filter(|_| limiter.try_acquire_at("x", 0, reading).is_ok())
            .count();
        assert_eq!(granted, 0, "at {reading} ns: {granted} of 10 granted");
    }
    clock.set_ns(10_000 * MS);
    let granted = (0..10)
        .filter(|_| limiter.try_acquire("x", 0).is_ok())
        .count();
    assert_eq!(granted, 0, "back at 10 s: {granted} of 10 granted");
    // The debt is repaid at the new rate: 10 tokens in 10 ms, counted from the horizon
    // (10.001 s: the clock's highest reading plus the tolerance).
    clock.set_ns(10_011 * MS);
    assert!(limiter.try_acquire_n("x", 0, 10).is_ok());
}
