//! Loom models of `RateLimit`'s charge protocol: racing charges of one actor across several
//! rows, racing resets at a window boundary with a lagging reading among them, and an
//! innocent actor racing a heavy one that shares one of its rows.
//!
//! Each model checks the guarantees of `admit::quota`'s module docs ("Orderings"), no more and
//! no less: per actor and window, admitted never exceeds the limit (no slack upward); the
//! estimate is never below what was admitted (no lost charge); the estimate exceeds what was
//! admitted by at most the charges of torn attempts (the documented over-count slack); no word
//! exceeds its limit.
//!
//! A last model races a far-future reading against an ordinary charge: the reading is refused
//! and moves nothing the other thread sees.
//!
//! The limiters are tiny (4 buckets, through the hidden `loom` feature) so that the models
//! stay small; the protocol does not depend on the array's size. Their clock stands at `W`,
//! the latest reading any model hands over, so that no ordinary reading is refused as ahead
//! of it; readings up to the tolerance (1 ms) pass the horizon without reading the clock, and
//! the boundary models' first charge at `W - 1` refreshes it before any thread starts, so
//! inside the threads the horizon is one load. Each model runs in seconds at
//! `LOOM_MAX_PREEMPTIONS=2` (see `.ci/loom.sh`).

use admit::quota::{Quota, RateLimit};
use admit::quota::{RateLimitRefused, VolumeLimit};
use admit::ManualClock;
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

const MS: u64 = 1_000_000;
const W: u64 = 1_000 * MS;
const KEYS: (u64, u64) = (7, 11);

fn limiter(events: u32, bytes: u32, rows: usize, buckets: usize) -> Arc<RateLimit<ManualClock>> {
    let quota = Quota::new(events, bytes, Duration::from_nanos(W))
        .and_then(|q| q.with_rows(rows))
        .unwrap();
    let clock = ManualClock::starting_at(W);
    Arc::new(RateLimit::loom_with_geometry(quota, buckets, KEYS, clock).unwrap())
}

/// What one thread's charge came to.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    /// The window it counted in, if admitted.
    window: Option<u64>,
    torn: u32,
}

fn charge(q: &RateLimit<ManualClock>, actor: &str, bytes: u64, now: u64) -> Outcome {
    let (result, torn) = q.loom_charge(actor, bytes, now);
    Outcome {
        window: result.ok(),
        torn,
    }
}

fn spawn_charges(
    q: &Arc<RateLimit<ManualClock>>,
    charges: &[(&'static str, u64, u64)],
) -> Vec<Outcome> {
    let handles: Vec<_> = charges
        .iter()
        .map(|&(actor, bytes, now)| {
            let q = q.clone();
            thread::spawn(move || charge(&q, actor, bytes, now))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Checks one actor's outcome in one window: at most `max_writes` admitted, none missing from
/// the estimate, the estimate ahead by at most the torn attempts' charges, no word past its
/// limit; and with no torn attempt, exactly `max_writes` admitted of `racers` (the limit is
/// reached, nobody was refused early).
fn check_one_window(
    q: &RateLimit<ManualClock>,
    outcomes: &[Outcome],
    now: u64,
    bytes: u32,
    max_writes: u32,
) {
    let admitted = outcomes.iter().filter(|o| o.window.is_some()).count() as u32;
    let torn: u32 = outcomes.iter().map(|o| o.torn).sum();
    let usage = q.usage_at("a", now).unwrap();
    let limits = q.quota();
    assert!(admitted <= max_writes, "admitted {admitted} > {max_writes}");
    assert!(
        usage.events >= admitted && usage.bytes >= bytes * admitted,
        "lost a charge: {usage:?}, admitted {admitted}"
    );
    assert!(
        usage.events <= admitted + torn && usage.bytes <= bytes * (admitted + torn),
        "over-count beyond the torn attempts: {usage:?}, admitted {admitted}, torn {torn}"
    );
    assert!(usage.events <= limits.events() && usage.bytes <= limits.bytes());
    if torn == 0 {
        let racers = outcomes.len() as u32;
        assert_eq!(
            admitted,
            racers.min(max_writes),
            "refused early without a torn attempt"
        );
        assert_eq!((usage.events, usage.bytes), (admitted, bytes * admitted));
    }
}

/// Two threads charge one actor in two rows, 1 event of 3 bytes each, against 2 events and
/// 5 bytes: only one write fits the bytes.
#[test]
fn racing_charges_of_one_actor_over_two_rows_never_pass_the_limit_nor_lose_a_charge() {
    loom::model(|| {
        let q = limiter(2, 5, 2, 4);
        let outcomes = spawn_charges(&q, &[("a", 3, 0), ("a", 3, 0)]);
        check_one_window(&q, &outcomes, 0, 3, 1);
    });
}

/// Three threads, two rows (two words, so attempts can tear), events and bytes: 2 events and
/// 4 bytes, 2 bytes each. The slack is not hypothetical: some interleaving tears an attempt,
/// and the model asserts that it did.
#[test]
fn three_racers_on_two_words_keep_the_documented_slack() {
    // Outside the model: a plain std flag, set by any execution that tore an attempt.
    static SAW_TORN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    loom::model(|| {
        let q = limiter(2, 4, 2, 4);
        let outcomes = spawn_charges(&q, &[("a", 2, 0), ("a", 2, 0), ("a", 2, 0)]);
        check_one_window(&q, &outcomes, 0, 2, 2);
        if outcomes.iter().any(|o| o.torn > 0) {
            SAW_TORN.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(
        SAW_TORN.load(std::sync::atomic::Ordering::Relaxed),
        "no interleaving tore an attempt: the slack path went unexplored"
    );
}

/// Events only, two rows, limit 2, three racers: at most 2 admitted, estimate exact up to the
/// torn attempts.
#[test]
fn racing_event_charges_across_two_rows_are_counted_exactly_up_to_torn_attempts() {
    loom::model(|| {
        let q = limiter(2, 1, 2, 4);
        let outcomes = spawn_charges(&q, &[("a", 0, 0), ("a", 0, 0), ("a", 0, 0)]);
        check_one_window(&q, &outcomes, 0, 0, 2);
    });
}

/// Window 0 is full (limit 2, charged before the threads start). At the boundary two threads
/// charge at the first nanosecond of window 1 while a third still holds a reading from
/// window 0. The stale word is reset by exactly one CAS, never twice; the lagging thread is
/// either refused (it saw window 0, full) or counted in window 1 (it saw the header moved on),
/// never in window 0; window 1 admits exactly its limit of the three and loses none.
#[test]
fn charges_at_a_window_boundary_never_lose_a_charge_nor_pass_the_limit() {
    loom::model(|| {
        let q = limiter(2, 1, 1, 4);
        assert!(q.loom_charge("a", 0, W - 1).0.is_ok());
        assert!(q.loom_charge("a", 0, W - 1).0.is_ok());
        let outcomes = spawn_charges(&q, &[("a", 0, W), ("a", 0, W), ("a", 0, W - 1)]);
        let in_window = |w| outcomes.iter().filter(|o| o.window == Some(w)).count() as u32;
        assert_eq!(
            in_window(0),
            0,
            "a lagging reading got into the full window 0"
        );
        let admitted = in_window(1);
        let torn: u32 = outcomes.iter().map(|o| o.torn).sum();
        // One row, events only: one word, so no attempt can tear.
        assert_eq!(torn, 0);
        // Whichever two of the three reach window 1 first get in; a reset that lost or
        // double-counted a charge would show here.
        assert_eq!(admitted, 2);
        assert_eq!(q.usage_at("a", W).unwrap().events, 2);
        // The first racer to commit always gets in: window 1 starts empty.
        assert!(outcomes[0].window == Some(1) || outcomes[1].window == Some(1));
    });
}

/// As above with bytes and two rows, so that attempts can tear: per window, admitted stays
/// within the limits, window 1's estimate covers what it admitted and exceeds it by at most
/// the torn attempts' charges.
#[test]
fn a_boundary_race_over_two_rows_and_two_limits_keeps_the_documented_slack() {
    loom::model(|| {
        let q = limiter(2, 4, 2, 4);
        assert!(q.loom_charge("a", 2, W - 1).0.is_ok());
        assert!(q.loom_charge("a", 2, W - 1).0.is_ok());
        let outcomes = spawn_charges(&q, &[("a", 2, W), ("a", 2, W - 1)]);
        assert!(outcomes.iter().all(|o| o.window != Some(0)));
        let torn: u32 = outcomes.iter().map(|o| o.torn).sum();
        let admitted = outcomes.iter().filter(|o| o.window == Some(1)).count() as u32;
        let usage = q.usage_at("a", W).unwrap();
        assert!(
            usage.events >= admitted && usage.bytes >= 2 * admitted,
            "{usage:?}"
        );
        assert!(
            usage.events <= admitted + torn,
            "{usage:?} admitted {admitted} torn {torn}"
        );
        assert!(usage.bytes <= 2 * (admitted + torn), "{usage:?}");
        assert!(usage.events <= 2 && usage.bytes <= 4);
        // Without a torn attempt the racer at W always gets in: window 1 had room for both.
        if torn == 0 {
            assert_eq!(outcomes[0].window, Some(1));
        }
    });
}

/// Two rows of two buckets. A heavy actor and an innocent one share their row-0 bucket and
/// nothing else; both race to charge, limit 1 each. The innocent one is never refused, and
/// neither is the heavy one's first write: a shared row raises to the heavier, not the sum.
#[test]
fn an_innocent_sharing_one_row_with_a_racing_heavy_actor_is_never_refused() {
    loom::model(|| {
        let q = limiter(1, 1, 2, 4);
        let heavy = "heavy";
        let h = q.loom_bucket_indexes(heavy);
        let innocent: &'static str = ["i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7", "i8", "i9"]
            .into_iter()
            .find(|n| {
                let i = q.loom_bucket_indexes(n);
                i[0] == h[0] && i[1] != h[1]
            })
            .expect("no name shares exactly row 0 with the heavy actor");
        let outcomes = spawn_charges(&q, &[(heavy, 0, 0), (innocent, 0, 0), (heavy, 0, 0)]);
        assert!(
            outcomes[1].window.is_some(),
            "the innocent actor was refused"
        );
        let heavy_admitted = [outcomes[0], outcomes[2]]
            .iter()
            .filter(|o| o.window.is_some())
            .count();
        assert_eq!(
            heavy_admitted, 1,
            "the heavy actor got {heavy_admitted} of 1"
        );
        let e = q.loom_charge(heavy, 0, 0).0.unwrap_err();
        assert_eq!(e.exceeded().map(|e| e.limit()), Some(VolumeLimit::Events));
    });
}

/// One thread hands a reading 584 years ahead of the clock while another charges at an
/// ordinary reading past a window turn. Whatever the interleaving, the far-future reading is
/// refused as ahead and counted nowhere, and the ordinary charge is admitted in its own
/// window (1), as is every later one: the header never reaches the far future's window.
#[test]
fn a_far_future_reading_racing_an_ordinary_charge_moves_nothing() {
    loom::model(|| {
        let q = limiter(3, 1, 1, 4);
        let mallory = {
            let q = q.clone();
            thread::spawn(move || q.loom_charge("mallory", 0, u64::MAX).0)
        };
        let a = {
            let q = q.clone();
            thread::spawn(move || q.loom_charge("a", 0, W).0)
        };
        let refused = mallory.join().unwrap();
        assert!(
            matches!(refused, Err(RateLimitRefused::ReadingAhead(_))),
            "{refused:?}"
        );
        assert_eq!(a.join().unwrap(), Ok(1));
        // Window 1 turns a whole window after W: the header was not moved past it.
        let usage = q.usage_at("a", W).unwrap();
        assert_eq!(usage.window_turns_in, Duration::from_nanos(W));
        assert_eq!(q.loom_charge("b", 0, W).0, Ok(1));
    });
}
