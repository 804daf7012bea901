//! Loom models of the entry table at saturation, for the limiter and for fairness: an insert
//! whose copy a helper promoted and someone else then reclaimed, and a stale update racing the
//! reuse of its slot by another key with the same in-word fingerprint.
//!
//! Tables have cap 1 and a single slot, so both keys share one window and the second key can
//! only ever take the slot the first one left. The SipHash keys are fixed, so every execution
//! places keys identically.

use admit::fairness::Quotas;
use admit::{BucketConfig, Limiter, ManualClock};
use loom::sync::Arc;
use loom::thread;
use std::sync::OnceLock;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn limiter(burst: u32) -> Arc<Limiter<ManualClock>> {
    let config = BucketConfig::new(burst, Duration::from_millis(10)).unwrap();
    Arc::new(
        Limiter::builder()
            .cap(1)
            .geometry(1, 1)
            .hash_keys(7, 11)
            .build_with_clock([config], ManualClock::starting_at(1_000 * MS))
            .unwrap(),
    )
}

/// One sketch row of two cells: what these models race is the table's insert, reclaim and
/// reuse of one slot, which the sketch takes no part in; with four rows every first acquire
/// adds four loads for loom to branch on, and at three preemptions the models did not finish
/// in 23 CPU-minutes.
fn quotas(limit: u32) -> Quotas {
    Quotas::builder()
        .quota(limit)
        .actors(1)
        .model_geometry(1, 1, (7, 11))
        .model_sketch(2)
        .model_sketch_rows(1)
        .build()
        .unwrap()
}

/// The first identity after `x` whose in-word fingerprint equals `x`'s and whose tag differs:
/// only the tag tells the two apart.
fn fingerprint_twin(x: &[u8], fingerprint: impl Fn(&[u8]) -> (u32, u32)) -> &'static [u8] {
    let (fp, tag) = fingerprint(x);
    let twin = (0u32..)
        .map(|i| i.to_le_bytes().to_vec())
        .find(|id| {
            let (f, t) = fingerprint(id);
            f == fp && t != tag
        })
        .unwrap();
    Box::leak(twin.into_boxed_slice())
}

/// Issue #11, item 1, limiter. Thread A first-charges `x` and may be preempted right after
/// publishing its copy; thread B charges `x` (helping A's copy into a member), then, at 20 ms
/// with the table at its cap, charges `y`, which reclaims `x`'s full entry and takes the one
/// place. When A resumes, nothing may be freed or given back twice: `len()` stays within the
/// cap and `y`'s drained entry is never blanked.
#[test]
fn limiter_insert_whose_helped_copy_was_reclaimed_frees_nothing_twice() {
    loom::model(|| {
        let l = limiter(1);
        let a = {
            let l = l.clone();
            thread::spawn(move || l.try_acquire_at(b"x", 0, 0).is_ok())
        };
        let b = {
            let l = l.clone();
            thread::spawn(move || {
                let x = l.try_acquire_at(b"x", 0, 0).is_ok();
                let y = l.try_acquire_at(b"y", 0, 20 * MS);
                (x, y)
            })
        };
        let a = a.join().unwrap();
        let (bx, by) = b.join().unwrap();
        assert!(l.len() <= l.cap(), "live wrapped: len {}", l.len());
        assert!(a || bx, "x's first charge was refused by both");
        let y = by.unwrap();
        let members = usize::from(l.entry_tokens_at(b"x", 0, 20 * MS).is_some())
            + usize::from(l.entry_tokens_at(b"y", 0, 20 * MS).is_some());
        assert_eq!(l.len(), members, "len counts a slot that holds no member");
        if !y.via_overflow() {
            assert_eq!(
                l.entry_tokens_at(b"y", 0, 20 * MS),
                Some(0),
                "y's drained entry was removed (a fresh budget)"
            );
        }
    });
}

/// Issue #11, item 1, fairness: the same interleaving. A acquires and releases `x`; B acquires
/// and releases `x`, then acquires `y` and holds it. `y`'s count is never lost and `live` is
/// released exactly once per entry.
#[test]
fn fairness_insert_whose_helped_copy_was_reclaimed_frees_nothing_twice() {
    loom::model(|| {
        let q = quotas(4);
        let a = {
            let q = q.clone();
            thread::spawn(move || drop(q.try_acquire(b"x").unwrap()))
        };
        let b = {
            let q = q.clone();
            thread::spawn(move || {
                drop(q.try_acquire(b"x").unwrap());
                q.try_acquire_owned(b"y").unwrap()
            })
        };
        a.join().unwrap();
        let y = b.join().unwrap();
        assert!(q.live_actors() <= q.actors(), "live wrapped");
        assert_eq!(q.total_in_flight(), 1, "y's count was lost");
        assert!(
            q.in_flight(b"y") + q.overflow_in_flight() == 1,
            "y's op is counted nowhere"
        );
        drop(y);
        assert_eq!(q.total_in_flight(), 0);
        assert!(q.live_actors() <= q.actors());
        assert!(q.try_acquire(b"z").is_ok(), "the table is disabled");
    });
}

/// Issue #11, item 3, fairness. `x` has an entry at zero. Thread A acquires `x` (a stale
/// reader of the zero word); thread B acquires and releases `y`, whose fingerprint equals
/// `x`'s, which reclaims `x`'s zero entry and leaves `y`'s own entry at zero in the same slot:
/// the very word A read. A's update must never land on `y`'s entry.
#[test]
fn fairness_stale_acquire_never_lands_on_a_fingerprint_twin() {
    static TWIN: OnceLock<&'static [u8]> = OnceLock::new();
    loom::model(|| {
        let q = quotas(4);
        let y = *TWIN.get_or_init(|| fingerprint_twin(b"x", |id| q.model_fingerprint(id)));
        drop(q.try_acquire(b"x").unwrap());
        let a = {
            let q = q.clone();
            thread::spawn(move || drop(q.try_acquire(b"x")))
        };
        let b = {
            let q = q.clone();
            thread::spawn(move || drop(q.try_acquire(y)))
        };
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(q.total_in_flight(), 0, "a count leaked onto another actor");
        assert!(q.live_actors() <= q.actors());
    });
}

/// Issue #11, item 3, limiter. `x` was charged at 0 (full again at 10 ms). Thread A charges
/// two tokens of `x` at 20 ms (a stale reader of that word); thread B sweeps at 20 ms, freeing `x`'s slot,
/// then charges `y`, whose fingerprint equals `x`'s, at a reading no later than the sweep's.
/// A's charge must never land on `y`'s entry: `y` shows exactly its own charge.
#[test]
fn limiter_stale_charge_never_lands_on_a_fingerprint_twin() {
    static TWIN: OnceLock<&'static [u8]> = OnceLock::new();
    loom::model(|| {
        let l = limiter(2);
        let y = *TWIN.get_or_init(|| fingerprint_twin(b"x", |id| l.model_fingerprint(id, 0)));
        assert!(l.try_acquire_at(b"x", 0, 0).is_ok());
        let a = {
            let l = l.clone();
            thread::spawn(move || l.try_acquire_n_at(b"x", 0, 2, 20 * MS).is_ok())
        };
        let b = {
            let l = l.clone();
            thread::spawn(move || {
                l.reclaim_full_at(20 * MS).unwrap();
                l.try_acquire_at(y, 0, 0)
            })
        };
        assert!(a.join().unwrap(), "x is full at 20 ms");
        // y's own one charge leaves it at least one of its two tokens at 20 ms; x's two-token
        // charge landing on y's entry would leave none.
        let by = b.join().unwrap();
        assert!(l.len() <= l.cap());
        if let Ok(grant) = by {
            if !grant.via_overflow() {
                if let Some(tokens) = l.entry_tokens_at(y, 0, 20 * MS) {
                    assert!(tokens >= 1, "x's charge landed on y's entry");
                }
            }
        }
    });
}
