//! Loom models of the fairness quotas: acquire/release races, permits dropped on other
//! threads, removal at zero racing an acquire, and the drain's wake-up.
//!
//! Permits that cross to a spawned thread are `OwnedPermit`s (loom's threads are `'static`);
//! the borrowing `Permit` differs only in how it reaches the table, and frees its place through
//! the same release path, which the models that drop one on the main thread also run.

use admit::fairness::{OwnedPermit, Quotas};
use loom::thread;

fn quotas(limit: u32, actors: usize) -> Quotas {
    Quotas::builder()
        .quota(limit)
        .actors(actors)
        .model_geometry(2, 4, (7, 11))
        .build()
        .unwrap()
}

/// Actor x (quota 1) holds one permit; two threads race to acquire for x while this thread
/// drops it. Every racer checks, right after its attempt, that x's own count is within the
/// quota. Returns the permits the racers won.
fn two_racers_while_a_permit_is_dropped(q: &Quotas) -> Vec<OwnedPermit> {
    let held = q.try_acquire(b"x").unwrap();
    let racers: Vec<_> = (0..2)
        .map(|_| {
            let q = q.clone();
            thread::spawn(move || {
                let p = q.try_acquire_owned(b"x");
                assert!(q.in_flight(b"x") <= 1, "quota exceeded");
                p.ok()
            })
        })
        .collect();
    drop(held);
    racers
        .into_iter()
        .filter_map(|r| r.join().unwrap())
        .collect()
}

/// Two threads racing to acquire for one actor with quota 1 while a third releases, with room
/// in the table: the actor's count never exceeds the quota, and exactly the admitted permits
/// are counted.
#[test]
fn acquires_never_exceed_the_quota() {
    loom::model(|| {
        let q = quotas(1, 4);
        let admitted = two_racers_while_a_permit_is_dropped(&q);
        assert!(
            admitted.len() <= 1,
            "two ops of one actor admitted with quota 1"
        );
        assert_eq!(q.in_flight(b"x") as usize, admitted.len());
        assert_eq!(q.shared_in_flight(), 0);
    });
}

/// The same race with the table at its cap (two places: the held entry and one racer's
/// insert fill it): the actor's own count still never exceeds the quota; a racer that found
/// the cap full is counted against the shared quota instead, which is capped too (see
/// "At the cap" in the table's docs).
#[test]
fn at_the_cap_the_excess_lands_on_the_shared_quota() {
    loom::model(|| {
        let q = quotas(1, 2);
        let admitted = two_racers_while_a_permit_is_dropped(&q);
        let shared = admitted.iter().filter(|p| p.is_shared()).count();
        assert!(
            q.in_flight(b"x") <= 1,
            "the actor's own count exceeded the quota"
        );
        assert_eq!(q.in_flight(b"x") as usize + shared, admitted.len());
        assert!(q.shared_in_flight() <= 1);
    });
}

/// A permit handed to another thread and dropped there frees exactly one place.
#[test]
fn a_permit_dropped_on_another_thread_frees_one_place() {
    loom::model(|| {
        let q = quotas(2, 4);
        let a = q.try_acquire_owned(b"x").unwrap();
        let b = q.try_acquire(b"x").unwrap();
        let writer = thread::spawn(move || a.complete());
        let again = q.try_acquire(b"x");
        writer.join().unwrap();
        let again = again.ok();
        // Either the acquire ran before the release (refused) or after (admitted): either way
        // the count matches the permits alive.
        assert_eq!(q.in_flight(b"x"), 1 + u32::from(again.is_some()));
        drop((b, again));
        assert_eq!((q.in_flight(b"x"), q.total_in_flight()), (0, 0));
    });
}

/// One place, held by x's entry at zero. y's acquire finds the table full and reclaims the
/// zero entry while x acquires again on it: whichever CAS wins, every admitted op is counted
/// exactly once (in an entry or in the shared quota) and no entry is reclaimed while counted.
#[test]
fn reclaiming_a_zero_entry_racing_an_acquire() {
    loom::model(|| {
        let q = quotas(2, 1);
        drop(q.try_acquire(b"x").unwrap());
        assert_eq!((q.live_actors(), q.in_flight(b"x")), (1, 0));
        let x = {
            let q = q.clone();
            thread::spawn(move || q.try_acquire_owned(b"x").unwrap())
        };
        let y = {
            let q = q.clone();
            thread::spawn(move || q.try_acquire_owned(b"y").unwrap())
        };
        let (x, y) = (x.join().unwrap(), y.join().unwrap());
        assert!(q.live_actors() <= 1);
        let counted = q.in_flight(b"x") + q.in_flight(b"y") + q.shared_in_flight();
        assert_eq!(counted, 2, "a count was lost or duplicated");
        assert_eq!(q.total_in_flight(), 2);
        drop((x, y));
        assert_eq!(q.total_in_flight(), 0);
    });
}

/// `wait_idle` returns only after the last permit is dropped on another thread.
#[test]
fn wait_idle_is_woken_by_the_last_release() {
    loom::model(|| {
        let q = quotas(2, 4);
        let a = q.try_acquire_owned(b"x").unwrap();
        let b = q.try_acquire_owned(b"y").unwrap();
        let writer = thread::spawn(move || {
            drop(a);
            drop(b);
        });
        q.wait_idle();
        assert_eq!(q.total_in_flight(), 0);
        writer.join().unwrap();
    });
}
