//! Loom models of limits changed at runtime (#16): a change racing a decision on one bucket or
//! one limiter entry, two changes racing a decision, and a lowered in-flight quota racing
//! acquires. Each decision reads its config once, so every outcome is one a sequential history
//! (the changes at some point among the decisions) would give; a decision that mixed the burst
//! of one config with the interval of another leaves a state no such history leaves.

use admit::fairness::Quotas;
use admit::{BucketConfig, Limiter, ManualClock, TokenBucket};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn per(burst: u32, interval_ms: u64) -> BucketConfig {
    BucketConfig::new(burst, Duration::from_millis(interval_ms)).unwrap()
}

/// Old (2 per 1 s) owes 1 s after one take at 0. A take at 0 racing a change to (20 per
/// 100 ms): before the change it is granted under the old config (full again at 2 s), after it
/// under the new (full at 1.1 s). A decision mixing the two configs would leave 1 s (burst 2
/// with 100 ms: refused) or 2 s with the new burst's wait, which the assertion tells apart by
/// the grant.
#[test]
fn a_change_racing_a_take_on_one_bucket() {
    loom::model(|| {
        let b = Arc::new(TokenBucket::new(per(2, 1_000)));
        assert!(b.try_acquire_at(0).is_ok());
        let taker = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire_at(0).is_ok())
        };
        let changer = {
            let b = b.clone();
            thread::spawn(move || b.set_config(per(20, 100)).unwrap())
        };
        changer.join().unwrap();
        assert!(taker.join().unwrap(), "both orders grant");
        assert_eq!(b.config(), per(20, 100));
        let full_in = b.wait_for_at(20, 0).unwrap();
        assert!(
            full_in == Duration::from_millis(1_100) || full_in == Duration::from_millis(2_000),
            "full again in {full_in:?}: not a sequential outcome"
        );
    });
}

/// Two changes racing each other and a take: the last change wins (whichever it is), and the
/// take decided under exactly one of the three configs.
#[test]
fn two_changes_racing_a_take_on_one_bucket() {
    loom::model(|| {
        let b = Arc::new(TokenBucket::new(per(2, 1_000)));
        assert!(b.try_acquire_at(0).is_ok()); // owes 1 s
        let taker = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire_at(0).is_ok())
        };
        let to_fast = {
            let b = b.clone();
            thread::spawn(move || b.set_config(per(20, 100)).unwrap())
        };
        let to_one = {
            let b = b.clone();
            thread::spawn(move || b.set_config(per(1, 1_000)).unwrap())
        };
        to_fast.join().unwrap();
        to_one.join().unwrap();
        let granted = taker.join().unwrap();
        let config = b.config();
        assert!(
            config == per(20, 100) || config == per(1, 1_000),
            "{config:?}"
        );
        // Under (2, 1 s): granted, full at 2 s. Under (20, 100 ms): granted, full at 1.1 s.
        // Under (1, 1 s): 1 − 1 owed = 0, refused, full at 1 s.
        let full_in = b.wait_for_at(config.burst(), 0).unwrap();
        let outcome = (granted, full_in.as_millis());
        assert!(
            matches!(outcome, (true, 2_000) | (true, 1_100) | (false, 1_000)),
            "{outcome:?}: not a sequential outcome"
        );
    });
}

/// The same race on a limiter entry: the class's config is read once per decision.
#[test]
fn a_change_racing_a_charge_on_one_entry() {
    loom::model(|| {
        let l = Arc::new(
            Limiter::builder()
                .cap(2)
                .geometry(2, 4)
                .hash_keys(7, 11)
                .build_with_clock([per(2, 1_000)], ManualClock::starting_at(1_000 * MS))
                .unwrap(),
        );
        assert!(l.try_acquire_at(b"x", 0, 0).is_ok()); // owes 1 s
        let charger = {
            let l = l.clone();
            thread::spawn(move || l.try_acquire_at(b"x", 0, 0).is_ok())
        };
        let changer = {
            let l = l.clone();
            thread::spawn(move || l.set_config(0, per(1, 1_000)).unwrap())
        };
        changer.join().unwrap();
        let granted = charger.join().unwrap();
        // Before the change: granted under (2, 1 s), full at 2 s, 0 tokens under (1, 1 s).
        // After: 1 − 1 owed = 0 tokens, refused, full at 1 s.
        let full_in = l.peek_at(b"x", 0, 1, 0).unwrap().wait();
        let outcome = (granted, full_in.as_millis());
        assert!(
            matches!(outcome, (true, 2_000) | (false, 1_000)),
            "{outcome:?}: not a sequential outcome"
        );
        assert_eq!(l.len(), 1);
    });
}

fn quotas(limit: u32) -> Quotas {
    Quotas::builder()
        .quota(limit)
        .actors(2)
        .override_capacity(1)
        .model_geometry(2, 4, (7, 11))
        .model_sketch(2)
        .build()
        .unwrap()
}

/// Quota 3 lowered to 1 while two threads acquire for an actor already holding one permit:
/// each racer is admitted only under the quota it read (so at most 3 in flight, and after the
/// change none is admitted while 1 or more are held); the permit held stays; once everything
/// is dropped, exactly one op is admitted under the new quota.
#[test]
fn a_lowered_quota_racing_acquires() {
    loom::model(|| {
        let q = quotas(3);
        let held = q.try_acquire(b"x").unwrap();
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                thread::spawn(move || {
                    let p = q.try_acquire_owned(b"x");
                    assert!(q.in_flight(b"x") <= 3, "above the old quota");
                    p.ok()
                })
            })
            .collect();
        q.set_quota(1).unwrap();
        // After the change, on this thread: refused while any is held.
        assert!(q.try_acquire(b"x").is_err(), "admitted above the new quota");
        let won: Vec<_> = racers
            .into_iter()
            .filter_map(|r| r.join().unwrap())
            .collect();
        assert_eq!(
            q.in_flight(b"x"),
            1 + won.len() as u32,
            "a held permit was lost"
        );
        assert!(q.try_acquire(b"x").is_err());
        drop(won);
        drop(held);
        let one = q.try_acquire(b"x").unwrap();
        assert!(q.try_acquire(b"x").is_err(), "the new quota is 1");
        drop(one);
    });
}

/// Two threads give the same new actor an override while a third acquires for it, with room
/// for one overridden actor: both claims succeed on the one slot, and the acquire is decided
/// under the default or one of the overrides, never more.
#[test]
fn racing_overrides_of_one_actor_share_one_slot() {
    loom::model(|| {
        let q = quotas(1);
        let setters: Vec<_> = [2, 3]
            .into_iter()
            .map(|limit| {
                let q = q.clone();
                thread::spawn(move || q.set_override(b"y", Some(limit)).unwrap())
            })
            .collect();
        let acquirer = {
            let q = q.clone();
            thread::spawn(move || {
                let a = q.try_acquire_owned(b"y").ok();
                let b = q.try_acquire_owned(b"y").ok();
                (a.is_some() as u32) + (b.is_some() as u32)
            })
        };
        for s in setters {
            s.join().unwrap();
        }
        assert!(acquirer.join().unwrap() >= 1);
        let limit = q.limit_of(b"y");
        assert!(limit == 2 || limit == 3, "{limit}");
        assert!(
            q.set_override(b"z", Some(1)).is_err(),
            "the two claims took two slots"
        );
    });
}
