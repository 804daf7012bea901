//! The charge rules one by one, the proptest against the reference, churn, stability across
//! connections, and the bring-up burst.

use super::*;
use crate::bucket::Refunded;
use crate::check::limiter::{far_jump_millis, run, LimiterOp, Scenario};
use crate::clock::ManualClock;
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

const MS: u64 = 1_000_000;

/// The test limiters' clock reading: far enough on that every reading these tests hand to an
/// `_at` method is one the clock has already produced (see `clock::ReadingAhead`).
const LATE: u64 = 1 << 60;

fn cfg(burst: u32, interval_ms: u32) -> BucketConfig {
    BucketConfig::new(burst, Duration::from_millis(u64::from(interval_ms))).unwrap()
}

fn limiter(cap: usize, classes: &[BucketConfig]) -> Limiter<ManualClock> {
    Limiter::builder()
        .cap(cap)
        .build_with_clock(classes.iter().copied(), ManualClock::starting_at(LATE))
        .unwrap()
}

fn granted(r: Result<Grant, LimiterRefused>) -> bool {
    r.is_ok()
}

#[test]
fn present_key_charges_its_own_entry() {
    let l = limiter(4, &[cfg(2, 1_000)]);
    assert!(granted(l.try_acquire_at(b"a", 0, 0)));
    assert!(granted(l.try_acquire_at(b"a", 0, 0)));
    let limited = *l.try_acquire_at(b"a", 0, 0).unwrap_err().limited().unwrap();
    assert!(!limited.via_overflow());
    assert_eq!(limited.wait(), Duration::from_millis(1_000));
    assert_eq!(limited.retry_after_secs(), 1);
    assert_eq!(l.len(), 1);
}

#[test]
fn absent_below_cap_inserts_a_full_bucket() {
    let l = limiter(4, &[cfg(3, 1_000)]);
    for id in [&b"a"[..], b"b", b"c", b"d"] {
        assert!(
            granted(l.try_acquire_n_at(id, 0, 3, 0)),
            "a new entry starts full"
        );
    }
    assert_eq!(l.len(), 4);
}

#[test]
fn at_cap_full_entries_are_reclaimed_then_the_new_key_inserted() {
    let l = limiter(2, &[cfg(2, 100)]);
    assert!(granted(l.try_acquire_at(b"a", 0, 0)));
    assert!(granted(l.try_acquire_at(b"b", 0, 0)));
    // At 100 ms both have refilled to full; a new key reclaims them and gets its own entry.
    let g = l.try_acquire_at(b"c", 0, 100 * MS).unwrap();
    assert!(!g.via_overflow());
    assert_eq!(l.len(), 1, "every full entry is reclaimed, not just one");
    assert_eq!(l.overflow_charges(0), Some(0));
}

#[test]
fn at_cap_with_every_entry_drained_the_overflow_bucket_pays() {
    let classes = [cfg(2, 1_000), cfg(1, 1_000)];
    let l = limiter(2, &classes);
    // Fill the table with drained entries of class 0 only.
    assert!(granted(l.try_acquire_n_at(b"a", 0, 2, 0)));
    assert!(granted(l.try_acquire_n_at(b"b", 0, 2, 0)));
    // Class 1 has no entry anywhere in the table; its overflow bucket still answers.
    let g = l.try_acquire_at(b"c", 1, 0).unwrap();
    assert!(g.via_overflow());
    let limited = *l.try_acquire_at(b"d", 1, 0).unwrap_err().limited().unwrap();
    assert!(limited.via_overflow(), "never admitted unlimited");
    assert_eq!(limited.wait(), Duration::from_millis(1_000));
    assert_eq!(l.overflow_charges(1), Some(2));
    assert_eq!(l.overflow_charges(0), Some(0));
    assert_eq!(l.len(), 2, "overflow buckets do not count against the cap");
    // The drained entries are still there and still drained.
    assert!(l.try_acquire_at(b"a", 0, 0).is_err());
}

#[test]
fn a_drained_entry_is_never_reclaimed_however_hard_the_table_is_pushed() {
    let l = limiter(1, &[cfg(2, 1_000)]);
    assert!(granted(l.try_acquire_at(b"victim", 0, 0)));
    for i in 0..1_000u32 {
        let _ = l.try_acquire_at(&i.to_le_bytes(), 0, 999 * MS);
        l.reclaim_full_at(999 * MS).unwrap();
    }
    // Still holding one token: the victim's entry survived with its debt.
    assert_eq!(l.entry_tokens_at(b"victim", 0, 999 * MS), Some(1));
}

#[test]
fn the_idle_sweep_reclaims_only_full_entries() {
    let l = limiter(8, &[cfg(2, 100)]);
    assert!(granted(l.try_acquire_at(b"slow", 0, 0)));
    assert!(granted(l.try_acquire_at(b"fast", 0, 50 * MS)));
    assert_eq!(l.reclaim_full_at(100 * MS), Ok(1));
    assert_eq!(l.entry_tokens_at(b"slow", 0, 100 * MS), None);
    assert_eq!(l.entry_tokens_at(b"fast", 0, 100 * MS), Some(1));
}

#[test]
fn bad_requests_are_typed_never_panics() {
    let l = limiter(2, &[cfg(2, 100)]);
    assert!(matches!(
        l.try_acquire_at(b"a", 7, 0),
        Err(LimiterRefused::Invalid(InvalidCharge::UnknownClass {
            class: 7,
            classes: 1
        }))
    ));
    assert!(matches!(
        l.try_acquire_n_at(b"a", 0, 3, 0),
        Err(LimiterRefused::Invalid(InvalidCharge::ExceedsBurst {
            requested: 3,
            burst: 2,
            ..
        }))
    ));
    assert!(l.peek_at(b"a", 9, 1, 0).is_err());
    assert_eq!(l.len(), 0, "an invalid charge touches nothing");
    assert_eq!(
        Limiter::builder().cap(0).build([cfg(1, 1)]).unwrap_err(),
        LimiterConfigError::ZeroCap
    );
    assert!(matches!(
        Limiter::builder().cap(usize::MAX).build([cfg(1, 1)]),
        Err(LimiterConfigError::CapTooLarge { .. })
    ));
    assert_eq!(
        Limiter::builder().build([]).unwrap_err(),
        LimiterConfigError::NoClasses
    );
    assert!(LimiterConfigError::ZeroCap.to_string().contains("`cap`"));
}

#[test]
fn a_key_hashed_once_charges_the_same_bucket_as_its_identity() {
    let l = limiter(4, &[cfg(3, 1_000), cfg(1, 1_000)]);
    let key = crate::HashedActor::new(b"conn-7");
    assert!(granted(l.try_acquire_hashed_at(&key, 0, 2, 0)));
    assert!(granted(l.try_acquire_at(b"conn-7", 0, 0)));
    assert!(l
        .try_acquire_hashed_at(&key, 0, 1, 0)
        .unwrap_err()
        .limited()
        .is_some());
    assert_eq!(
        l.len(),
        1,
        "one entry for the identity, however it was charged"
    );
    // The other class of the same identity is a different bucket.
    assert!(granted(l.try_acquire_hashed_at(&key, 1, 1, 0)));
    assert!(matches!(
        l.try_acquire_hashed_at(&key, 1, 2, 0),
        Err(LimiterRefused::Invalid(InvalidCharge::ExceedsBurst { .. }))
    ));
    assert!(matches!(
        l.try_acquire_hashed_at(&key, 9, 1, 0),
        Err(LimiterRefused::Invalid(InvalidCharge::UnknownClass { .. }))
    ));
}

#[test]
fn a_hashed_actor_charges_the_identitys_own_entry_in_every_limiter() {
    // One hash per request: the same `HashedActor` serves two limiters, and in each it names
    // the entry the identity names.
    let a = limiter(4, &[cfg(3, 1_000)]);
    let b = limiter(4, &[cfg(3, 1_000)]);
    let actor = crate::HashedActor::new(b"x");
    assert!(granted(a.try_acquire_hashed_at(&actor, 0, 2, 0)));
    assert!(granted(b.try_acquire_hashed_at(&actor, 0, 1, 0)));
    assert_eq!(a.entry_tokens_at(b"x", 0, 0), Some(1));
    assert_eq!(b.entry_tokens_at(b"x", 0, 0), Some(2));
    assert!(granted(a.try_acquire_at(b"x", 0, 0)));
    assert!(
        !granted(a.try_acquire_hashed_at(&actor, 0, 1, 0)),
        "the burst is spent"
    );
    assert!(matches!(
        a.try_acquire_hashed_at(&actor, 7, 1, 0),
        Err(LimiterRefused::Invalid(InvalidCharge::UnknownClass { .. }))
    ));
    assert_eq!((a.len(), b.len()), (1, 1));
}

#[test]
fn peek_consumes_nothing() {
    let l = limiter(2, &[cfg(3, 100)]);
    for _ in 0..5 {
        let p = l.peek_at(b"a", 0, 3, 0).unwrap();
        assert_eq!(
            (p.available(), p.wait(), p.via_overflow()),
            (3, Duration::ZERO, false)
        );
    }
    assert_eq!(l.len(), 0);
    assert!(granted(l.try_acquire_n_at(b"a", 0, 3, 0)));
    assert_eq!(
        l.peek_at(b"a", 0, 2, 0).unwrap().wait(),
        Duration::from_millis(200)
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn identity_churn_keeps_len_at_most_cap_memory_fixed_and_grants_bounded() {
    let burst = 4;
    let interval_ms = 10;
    let l = limiter(DEFAULT_CAP, &[cfg(burst, interval_ms)]);
    let memory = l.memory_bytes();
    let identities: u64 = if cfg!(miri) { 2_000 } else { 1_000_000 };
    // One new identity per microsecond: one second of churn.
    let mut grants = 0u64;
    for i in 0..identities {
        let now = i * 1_000;
        if l.try_acquire_at(&i.to_le_bytes(), 0, now).is_ok() {
            grants += 1;
        }
        assert!(l.len() <= DEFAULT_CAP);
    }
    assert_eq!(l.memory_bytes(), memory, "the table never grows");
    assert_eq!(
        l.table.slots(),
        DEFAULT_CAP * 5 / 2,
        "the slot array is fixed at construction: 2.5 slots per unit of cap"
    );
    // Stated in advance: an entry charged once is full again one interval later, so each of
    // the cap's slots hosts at most one new identity per interval (plus the first); the
    // overflow bucket adds its burst plus one token per interval.
    let duration_ms = identities / 1_000;
    let intervals = duration_ms / u64::from(interval_ms);
    let bound = DEFAULT_CAP as u64 * (1 + intervals) + u64::from(burst) + intervals;
    assert!(grants <= bound, "granted {grants} > bound {bound}");
    assert!(
        grants > DEFAULT_CAP as u64,
        "reclaimed slots must be reused"
    );
}

#[test]
fn one_identity_on_two_connections_spends_one_bucket() {
    let l = Arc::new(limiter(DEFAULT_CAP, &[cfg(100, 60_000)]));
    let rounds = if cfg!(miri) { 1 } else { 200 };
    for round in 0..rounds {
        let id = format!("caller-{round}");
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                let id = id.clone();
                std::thread::spawn(move || {
                    (0..100)
                        .filter(|_| l.try_acquire_at(id.as_bytes(), 0, 0).is_ok())
                        .count()
                })
            })
            .collect();
        let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(
            total, 100,
            "round {round}: two connections must share one budget"
        );
    }
}

#[test]
fn racing_first_charges_of_one_identity_never_double_the_budget() {
    // Burst 1: whatever the interleaving, exactly one of the racers is granted.
    let l = Arc::new(limiter(DEFAULT_CAP, &[cfg(1, 60_000)]));
    let rounds = if cfg!(miri) { 2 } else { 2_000 };
    for round in 0..rounds {
        let id = (round as u32).to_le_bytes();
        // Each round's readings start where the last round's sweep left off.
        let start = round * 60_000 * MS;
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (l, barrier) = (l.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    l.try_acquire_at(&id, 0, start).is_ok()
                })
            })
            .collect();
        let wins = threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|&w| w)
            .count();
        assert_eq!(wins, 1, "round {round}");
        l.reclaim_full_at(start + 60_000 * MS).unwrap();
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn a_bring_up_burst_of_512_distinct_identities_is_never_limited() {
    // The registrar's admission config: burst 512, one token per 500 ms.
    let admission = cfg(512, 500);
    // The registrar profile's cap (`registrar::REFERENCE_CAP`): 256 get entries of their own,
    // the other 256 are paid by the overflow bucket, whose burst (512) covers them.
    let l = limiter(256, &[admission]);
    for i in 0..512u32 {
        let r = l.try_acquire_at(format!("host-{i}").as_bytes(), 0, u64::from(i) * 100_000);
        assert!(r.is_ok(), "identity {i} was limited");
    }
    assert_eq!(l.overflow_charges(0), Some(256));
    // Every identity on an entry of its own needs cap >= 512.
    let l = limiter(512, &[admission]);
    for i in 0..512u32 {
        let g = l
            .try_acquire_at(format!("host-{i}").as_bytes(), 0, u64::from(i) * 100_000)
            .unwrap();
        assert!(!g.via_overflow());
    }
    assert_eq!(l.overflow_charges(0), Some(0));
}

#[test]
fn a_saturated_miss_skips_a_scan_that_cannot_free_anything() {
    let l = limiter(4, &[cfg(2, 1_000)]);
    for id in 0..4u32 {
        assert!(granted(l.try_acquire_n_at(&id.to_le_bytes(), 0, 2, 0)));
    }
    // One scan at the first saturated miss finds nothing full and moves the hint to 2 s.
    let _ = l.try_acquire_at(b"new", 0, 0);
    assert_eq!(l.hint.tick(), 2_000);
    assert!(l.hint.due(0, 1_999).is_none());
    // Until then no scan runs, and the overflow bucket answers.
    assert!(l
        .try_acquire_at(b"newer", 0, 1_999 * MS)
        .unwrap()
        .via_overflow());
    // At 2 s the entries are full: the next miss reclaims them all and gets an entry.
    assert!(!l
        .try_acquire_at(b"newest", 0, 2_000 * MS)
        .unwrap()
        .via_overflow());
    assert_eq!(l.len(), 1);
}

#[test]
fn a_newborn_entry_lowers_the_hint() {
    let l = limiter(2, &[cfg(2, 1_000), cfg(1, 10)]);
    assert!(granted(l.try_acquire_n_at(b"a", 0, 2, 0)));
    let _ = l.try_acquire_at(b"x", 0, 0); // below cap: no scan
    assert!(granted(l.try_acquire_n_at(b"b", 0, 1, 0)));
    // Saturated miss: a scan sets the hint to b's full_at (1 s)...
    let _ = l.try_acquire_at(b"c", 0, 0);
    // ...then b is reclaimed at 1 s, and a newborn of class 1 is full again at 1.01 s.
    assert!(!l
        .try_acquire_at(b"d", 1, 1_000 * MS)
        .unwrap()
        .via_overflow());
    assert!(l.hint.tick() <= 1_010, "the newborn must lower the hint");
    // So at 1.01 s a miss reclaims it instead of skipping the scan.
    assert!(!l
        .try_acquire_at(b"e", 1, 1_010 * MS)
        .unwrap()
        .via_overflow());
}

#[test]
fn limiter_corpus_scenarios_run() {
    // A hand-written scenario mixing every op, in both geometries and both units.
    for (window, micros) in [(None, false), (Some(usize::MAX), false), (None, true)] {
        run(&Scenario {
            micros,
            cap: 3,
            window,
            configs: vec![(2, 100), (1, 50)],
            ops: vec![
                LimiterOp::Charge {
                    id: 1,
                    class: 0,
                    n: 2,
                },
                LimiterOp::Charge {
                    id: 2,
                    class: 1,
                    n: 1,
                },
                LimiterOp::Charge {
                    id: 3,
                    class: 0,
                    n: 1,
                },
                LimiterOp::Charge {
                    id: 4,
                    class: 0,
                    n: 1,
                },
                LimiterOp::Peek {
                    id: 5,
                    class: 1,
                    n: 1,
                },
                LimiterOp::Advance { ns: 60 * MS },
                LimiterOp::Charge {
                    id: 6,
                    class: 1,
                    n: 1,
                },
                LimiterOp::Sweep,
                LimiterOp::Advance { ns: 100 * MS },
                LimiterOp::Sweep,
                LimiterOp::Charge {
                    id: 1,
                    class: 0,
                    n: 9,
                },
                LimiterOp::Charge {
                    id: 1,
                    class: 3,
                    n: 1,
                },
            ],
        });
    }
}

/// Drained entries, overflow charges, peeks, sweeps, refunds and changes of limits on both
/// sides of a millisecond limiter's last instant (about 34.8 years), reached by the far jumps
/// of `far_jump_millis`, against the reference (which is handed every later reading as that
/// instant).
#[test]
fn millisecond_corpus_scenario_crosses_its_last_instant() {
    let charge = |id, class, n| LimiterOp::Charge { id, class, n };
    let peek = |id, class| LimiterOp::Peek { id, class, n: 1 };
    let mut ops = Vec::new();
    for pick in [252, 253, 254, 250, 250, 251, 7, 255, 252] {
        ops.extend([
            charge(1, 0, 2),
            charge(2, 1, 1),
            charge(3, 0, 1),
            peek(1, 0),
            LimiterOp::Advance { ns: 400 * MS },
            charge(1, 0, 1),
            LimiterOp::Refund {
                pick: 0,
                n: 1,
                elsewhere: false,
            },
            peek(3, 0),
            LimiterOp::SetConfig {
                class: 1,
                burst: 3,
                interval: 40,
                fine: false,
            },
            LimiterOp::Back { ns: 3 * MS },
            charge(2, 1, 2),
            LimiterOp::Sweep,
            LimiterOp::Advance {
                ns: far_jump_millis(pick),
            },
        ]);
    }
    for window in [None, Some(usize::MAX)] {
        run(&Scenario {
            cap: 2,
            window,
            configs: vec![(2, 1_000), (1, 50)],
            ops: ops.clone(),
            micros: false,
        });
    }
}

fn op_strategy() -> impl Strategy<Value = LimiterOp> {
    prop_oneof![
        6 => (0u32..10, 0u8..3, 0u8..4).prop_map(|(id, class, n)| LimiterOp::Charge { id, class, n }),
        2 => (any::<u32>(), 0u8..3, 1u8..3).prop_map(|(id, class, n)| LimiterOp::Charge { id, class, n }),
        1 => (0u32..10, 0u8..3, 0u8..4).prop_map(|(id, class, n)| LimiterOp::Peek { id, class, n }),
        2 => (0u64..400 * MS).prop_map(|ns| LimiterOp::Advance { ns }),
        1 => (250u8..=255).prop_map(|pick| LimiterOp::Advance { ns: far_jump_millis(pick) }),
        1 => Just(LimiterOp::Sweep),
        1 => (0u64..40 * MS).prop_map(|ns| LimiterOp::Back { ns }),
        1 => prop_oneof![0u64..2 * MS, 0u64..2_000 * MS].prop_map(|ns| LimiterOp::ClockBack { ns }),
        2 => (any::<u8>(), 0u8..4, prop::bool::weighted(0.2)).prop_map(|(pick, n, elsewhere)| LimiterOp::Refund { pick, n, elsewhere }),
        1 => (0u32..10, any::<u64>()).prop_map(|(id, ns)| LimiterOp::Ahead { id, ns }),
        1 => (0u8..4, 1u32..8, 1u32..1_000, any::<bool>()).prop_map(|(class, burst, interval, fine)| LimiterOp::SetConfig { class, burst, interval, fine }),
    ]
}

proptest! {
    #![proptest_config(crate::check::proptest_config(256))]

    /// Identical outcomes to the `HashMap` reference; len <= cap; no entry removed below its
    /// burst; overflow charged exactly when the rules say (see `check::limiter::run`).
    #[cfg_attr(
        miri,
        ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
    )]
    #[test]
    fn matches_the_reference_model(
        cap in 1usize..15,
        full_window in any::<bool>(),
        configs in proptest::collection::vec((1u32..4, 1u32..300), 2..=3),
        ops in proptest::collection::vec(op_strategy(), 1..150),
    ) {
        let (cap, window) = if full_window { (cap * 3, Some(usize::MAX)) } else { (cap, None) };
        run(&Scenario { cap, window, configs, ops, micros: false });
    }
}

/// Burst 1 per 10 ms. A charge at 0 ms is granted and one at 5 ms refused;
/// a sweep at 10 ms frees the (full) entry; a second charge at 5 ms must still be refused: the
/// fresh entry is dated no earlier than the reading the sweep used.
#[test]
fn a_reading_older_than_a_reclaim_never_finds_a_fuller_bucket() {
    let l = limiter(4, &[cfg(1, 10)]);
    assert!(granted(l.try_acquire_at(b"x", 0, 0)));
    assert!(!granted(l.try_acquire_at(b"x", 0, 5 * MS)));
    assert_eq!(l.reclaim_full_at(10 * MS), Ok(1));
    let peek = l.peek_at(b"x", 0, 1, 5 * MS).unwrap();
    assert_eq!(
        peek.available(),
        0,
        "a peek at 5 ms sees a token minted by the sweep"
    );
    let refused = l.try_acquire_at(b"x", 0, 5 * MS).unwrap_err();
    assert_eq!(
        refused.limited().unwrap().wait(),
        Duration::from_millis(5),
        "the token comes back at 10 ms, as it would have without the sweep"
    );
    // At the sweep's own reading the bucket is full, as the removed one was.
    assert!(granted(l.try_acquire_at(b"x", 0, 10 * MS)));
}

/// The same rule at the cap: a miss that reclaims at a later reading dates what it frees, so
/// an identity re-inserted with an older reading is no richer than before the reclaim.
#[test]
fn a_miss_that_reclaims_dates_the_entries_it_frees() {
    let l = limiter(1, &[cfg(1, 10)]);
    assert!(granted(l.try_acquire_at(b"x", 0, 0)));
    // y at 10 ms reclaims x's full entry and takes the one place.
    assert!(granted(l.try_acquire_at(b"y", 0, 10 * MS)));
    assert_eq!(l.overflow_charges(0), Some(0));
    // x at 10 ms reclaims nothing (y is drained) and is paid by the overflow bucket.
    assert!(granted(l.try_acquire_at(b"x", 0, 10 * MS)));
    assert_eq!(l.overflow_charges(0), Some(1));
    // y full again at 20 ms; x arrives with a stale 5 ms reading after a sweep at 20 ms.
    assert_eq!(l.reclaim_full_at(20 * MS), Ok(1));
    assert!(!granted(l.try_acquire_at(b"x", 0, 5 * MS)));
}

/// A reading far ahead of the limiter's own clock is refused at every
/// `_at` entry point with a typed error, and moves nothing any other caller sees.
#[test]
fn a_reading_ahead_of_the_clock_is_refused_and_changes_nothing() {
    let clock = ManualClock::starting_at(1_000 * MS);
    let l = Limiter::builder()
        .cap(2)
        .build_with_clock([cfg(1, 10)], clock.clone())
        .unwrap();
    let now = clock.now_ns();
    assert!(granted(l.try_acquire_at(b"a", 0, now)));
    assert!(granted(l.try_acquire_at(b"b", 0, now)));
    let ahead = |r: Result<Grant, LimiterRefused>| {
        matches!(
            r,
            Err(LimiterRefused::Invalid(InvalidCharge::ReadingAhead(ahead))) if ahead.clock_ns() == now
        )
    };
    for reading in [u64::MAX, now + crate::clock::READING_TOLERANCE_NS + 1] {
        assert!(ahead(l.try_acquire_at(b"c", 0, reading)));
        assert!(ahead(l.try_acquire_at(b"a", 0, reading)));
        assert!(ahead(l.try_acquire_n_at(b"c", 0, 1, reading)));
        let key = crate::HashedActor::new(b"c");
        assert!(ahead(l.try_acquire_hashed_at(&key, 0, 1, reading)));
        assert!(matches!(
            l.peek_at(b"c", 0, 1, reading),
            Err(InvalidCharge::ReadingAhead(_))
        ));
        assert!(l.reclaim_full_at(reading).is_err());
    }
    // Nothing moved: both drained entries are still there, still drained.
    assert_eq!(l.len(), 2);
    assert_eq!(l.entry_tokens_at(b"a", 0, now), Some(0));
    assert_eq!(l.entry_tokens_at(b"b", 0, now), Some(0));
    assert_eq!(l.overflow_charges(0), Some(0));
    // A reading up to the tolerance ahead is accepted (a TSC reading from another core).
    assert!(l
        .peek_at(b"a", 0, 1, now + crate::clock::READING_TOLERANCE_NS)
        .is_ok());
    let err = l.try_acquire_at(b"a", 0, u64::MAX).unwrap_err();
    assert!(err.to_string().contains("ahead of the clock"), "{err}");
}

/// A full table under a free-running clock with racing first uses of overlapping identities,
/// charges, and sweeps (the state the churn attacks force): `len()` never exceeds the cap or
/// wraps, and counts exactly the live entries once the threads are done.
#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn a_full_table_with_racing_first_uses_keeps_len_exact() {
    let clock = ManualClock::new();
    let l = Arc::new(
        Limiter::builder()
            .cap(8)
            .build_with_clock([cfg(1, 1)], clock.clone())
            .unwrap(),
    );
    let rounds = 200_000u32;
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let (l, clock) = (&l, &clock);
            s.spawn(move || {
                for i in 0..rounds {
                    let id = (i.wrapping_mul(2_654_435_761) ^ t) % 40;
                    let now = clock.advance_ns(u64::from(i % 3) * 100_000);
                    let _ = l.try_acquire_at(&id.to_le_bytes(), 0, now);
                    assert!(l.len() <= l.cap(), "len {} above the cap", l.len());
                    if i % 1024 == 0 {
                        let _ = l.reclaim_full_at(now);
                    }
                }
            });
        }
    });
    let now = clock.now_ns();
    let members = (0..40u32)
        .filter(|id| l.entry_tokens_at(&id.to_le_bytes(), 0, now).is_some())
        .count();
    assert_eq!(l.len(), members, "len counts slots that hold no member");
}

/// A refund at an older reading gave a token twice: burst 1 per 10 ms, a take at 0 (A), a
/// take at 10 ms (B), a refund of A at 0, and a take at 10 ms was granted: two grants at one
/// reading of a burst-1 bucket.
#[test]
fn a_refund_after_a_later_take_gives_nothing_back() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock(
            [BucketConfig::new(1, Duration::from_millis(10)).unwrap()],
            clock.clone(),
        )
        .unwrap();
    let a = limiter.try_acquire_at("alice", 0, 0).unwrap();
    clock.advance(Duration::from_millis(10));
    assert!(limiter.try_acquire_at("alice", 0, 10 * MS).is_ok(), "B");
    assert_eq!(limiter.refund_at(a, 1, 0), Ok(Refunded::Void));
    assert!(
        limiter.try_acquire_at("alice", 0, 10 * MS).is_err(),
        "two grants at 10 ms of a burst-1 bucket"
    );
    // With nothing between, a refund undoes its take exactly (the grant is consumed).
    clock.advance(Duration::from_millis(10));
    let c = limiter.try_acquire_at("alice", 0, 20 * MS).unwrap();
    assert_eq!(
        limiter.refund_at(c, 1, 20 * MS),
        Ok(Refunded::Exact { tokens: 1 })
    );
    assert!(limiter.try_acquire_at("alice", 0, 20 * MS).is_ok());
    assert!(limiter.try_acquire_at("alice", 0, 20 * MS).is_err());
}

/// A charge of 0 tokens is no free pass: refused exactly when one token would be, with the
/// same wait, and it takes nothing, on an entry and on the overflow bucket alike.
#[test]
fn a_charge_of_nothing_is_refused_exactly_when_one_token_would_be() {
    let l = limiter(1, &[cfg(2, 1_000)]);
    let zero = |who: &str| l.try_acquire_n_at(who, 0, 0, 0);
    assert!(zero("alice").is_ok(), "a full bucket");
    assert_eq!(l.len(), 0, "nothing charged, nothing inserted");
    l.try_acquire_n_at("alice", 0, 2, 0).unwrap();
    let refused = zero("alice").unwrap_err();
    let one = l.try_acquire_at("alice", 0, 0).unwrap_err();
    assert_eq!(refused, one, "the same refusal, the same wait");
    // The table is full (cap 1): bob is decided on the overflow bucket, which 0 never drains.
    for _ in 0..5 {
        assert!(zero("bob").is_ok());
    }
    assert!(l.try_acquire_n_at("bob", 0, 2, 0).unwrap().via_overflow());
    assert!(zero("carol").unwrap_err().limited().unwrap().via_overflow());
    // A second later one token is back for alice: 0 passes, and still takes nothing.
    let later = 1_000 * MS;
    assert!(l.try_acquire_n_at("alice", 0, 0, later).is_ok());
    assert!(
        l.try_acquire_at("alice", 0, later).is_ok(),
        "the token 0 did not take"
    );
}

/// The last instant a millisecond limiter counts, in nanoseconds: `MAX_MILLIS_NOW_TICK` ms,
/// about 34.8 years of its clock (between 2^59 and 2^60 ns).
const LAST_MS_NS: u64 = MAX_MILLIS_NOW_TICK * MS;

/// The refusal's wait, or `None` for a grant.
fn refused_wait(r: Result<Grant, LimiterRefused>) -> Option<Duration> {
    Some(r.err()?.limited()?.wait())
}

/// Every answer of a millisecond limiter (a charge's wait, a peek, a check, a debit's wait,
/// the overflow bucket) counts a reading past its last instant as that instant, as its
/// entries' arithmetic does: a drained bucket says so, with the wait counted from the last
/// instant, and nothing refills after it. Readings up to the last instant are exact.
#[test]
fn a_reading_past_the_last_instant_counts_as_it_in_every_answer() {
    // What the limiter counts a reading as, and the wait for one token of a burst of 2 per
    // second drained at `drained`, seen at `now`.
    let counted = |now: u64| now.min(LAST_MS_NS);
    let wait = |drained: u64, now: u64| {
        Duration::from_nanos((counted(drained) / MS + 1_000) * MS - counted(now))
    };
    for now in [
        1 << 59,
        LAST_MS_NS - 3_000 * MS,
        LAST_MS_NS - 1,
        LAST_MS_NS,
        LAST_MS_NS + 1,
        1 << 60,
        crate::clock::tick::MAX_NOW_TICK * MS,
        u64::MAX - 2 * crate::clock::READING_TOLERANCE_NS,
    ] {
        let l = Limiter::builder()
            .cap(1)
            .build_with_clock([cfg(2, 1_000)], ManualClock::starting_at(now + 2 * MS))
            .unwrap();
        assert!(granted(l.try_acquire_n_at(b"alice", 0, 2, now)), "{now}");
        let peek = l.peek_at(b"alice", 0, 1, now).unwrap();
        let drained = (0, wait(now, now));
        assert_eq!((peek.available(), peek.wait()), drained, "{now}: peek");
        let refused = refused_wait(l.try_acquire_at(b"alice", 0, now));
        assert_eq!(refused, Some(wait(now, now)), "{now}: charge");
        let check = l.check_at(b"alice", 0, 1, now);
        let checked = check.map_err(|e| e.limited().map(|l| l.wait()));
        assert_eq!(checked, Err(Some(wait(now, now))), "{now}: check");
        let nothing = refused_wait(l.try_acquire_n_at(b"alice", 0, 0, now));
        assert_eq!(nothing, Some(wait(now, now)), "{now}: a charge of 0");
        // A millisecond on: no token minted, and the wait counted to the same instant.
        let later = now + MS;
        let refused = refused_wait(l.try_acquire_at(b"alice", 0, later));
        assert_eq!(refused, Some(wait(now, later)), "{now}: charge 1 ms on");
        // The class's overflow bucket counts the same instant: bob, without an entry (the
        // table holds alice's drained one), drains it, and carol's debit of nothing sees it
        // drained.
        assert!(l
            .try_acquire_n_at(b"bob", 0, 2, now)
            .unwrap()
            .via_overflow());
        let debit = l.debit_at(b"carol", 0, 0, now).unwrap();
        assert!(debit.via_overflow(), "{now}");
        assert_eq!(debit.wait(), wait(now, now), "{now}: overflow");
        let refused = refused_wait(l.try_acquire_at(b"bob", 0, later + MS));
        assert_eq!(
            refused,
            Some(wait(now, later + MS)),
            "{now}: overflow 2 ms on"
        );
    }
}

/// A charge of 0 is decided by a check, which admits its reading against the horizon like any
/// decision (and may raise it): the model's horizon follows (two steps that parted them).
#[test]
fn a_charge_of_nothing_moves_the_modeled_horizon_as_the_limiter_does() {
    run(&Scenario {
        cap: 2,
        window: None,
        configs: vec![(2, 100), (1, 50)],
        ops: vec![
            LimiterOp::Advance { ns: 2 * MS },
            LimiterOp::Charge {
                id: 0,
                class: 0,
                n: 0,
            },
        ],
        micros: false,
    });
}
