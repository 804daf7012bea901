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
        .model_sketch(2)
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
        assert_eq!(q.overflow_in_flight(), 0);
    });
}

/// The same race with the table at its cap (two places): a racer that finds the cap full is
/// counted against the overflow quota, and still against its actor's own: the actor's ops in
/// flight, wherever held, never exceed the quota (see "At the cap" in the table's docs).
#[test]
fn at_the_cap_the_excess_lands_on_the_shared_quota() {
    loom::model(|| {
        let q = quotas(1, 2);
        let admitted = two_racers_while_a_permit_is_dropped(&q);
        let shared = admitted.iter().filter(|p| p.via_overflow()).count();
        assert!(admitted.len() <= 1, "the actor's total exceeded the quota");
        assert_eq!(q.in_flight(b"x") as usize + shared, admitted.len());
        assert!(q.overflow_in_flight() <= 1);
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
/// exactly once (in an entry or in the overflow quota) and no entry is reclaimed while counted.
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
        let counted = q.in_flight(b"x") + q.in_flight(b"y") + q.overflow_in_flight();
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

/// The scenario at quota 1: one place, held by another actor; `a` holds a shared
/// place. The other actor releases on another thread, then `a` acquires again and finds the
/// place free: its second op is refused, its one op in flight counted where it is held.
#[test]
fn an_actor_holding_a_shared_place_gets_none_through_a_new_entry() {
    loom::model(|| {
        let q = quotas(1, 1);
        let hog = q.try_acquire_owned(b"hog").unwrap();
        let shared = q.try_acquire(b"a").unwrap();
        assert!(shared.via_overflow());
        thread::spawn(move || drop(hog)).join().unwrap();
        let again = q.try_acquire(b"a");
        assert!(
            again.is_err(),
            "a second op of a (quota 1) admitted beside its shared one"
        );
        drop((shared, again));
        assert_eq!(q.total_in_flight(), 0);
    });
}

/// One place, held by another actor, while two threads acquire for `a` (`attempts` each,
/// keeping what they win). With `release_racing`, the other actor releases its place on a
/// third thread meanwhile; otherwise its entry is already idle (count 0), and the racers' own
/// paced scan frees it. Either way the table frees under the racers, so each may land on the
/// overflow count, on a new entry, or on an entry the other made. All the permits won are alive
/// at the end, so their number is `a`'s ops in flight at once.
fn racing_acquires_at_the_cap(limit: u32, attempts: [usize; 2], release_racing: bool) {
    loom::model(move || {
        // One slot and a one-slot window: every key meets the others there; one sketch row:
        // one cell per actor. The state space then stays small enough to explore at three
        // preemptions, and the race these models are about (the sketch write and the entry
        // write, each side fenced before it reads the other) is the same with one row or four.
        let q = Quotas::builder()
            .quota(limit)
            .actors(1)
            .model_geometry(1, 1, (7, 11))
            .model_sketch(2)
            .model_sketch_rows(1)
            .build()
            .unwrap();
        let hog = q.try_acquire_owned(b"hog").unwrap();
        let releaser = if release_racing {
            Some(thread::spawn(move || drop(hog)))
        } else {
            drop(hog);
            None
        };
        let racers: Vec<_> = attempts
            .iter()
            .map(|&n| {
                let q = q.clone();
                thread::spawn(move || {
                    (0..n)
                        .filter_map(|_| q.try_acquire_owned(b"a").ok())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let won: Vec<OwnedPermit> = racers.into_iter().flat_map(|r| r.join().unwrap()).collect();
        if let Some(releaser) = releaser {
            releaser.join().unwrap();
        }
        assert!(
            won.len() <= limit as usize,
            "{} ops of a in flight with quota {limit}",
            won.len()
        );
        let shared = won.iter().filter(|p| p.via_overflow()).count();
        assert_eq!(q.in_flight(b"a") as usize + shared, won.len());
        drop(won);
        assert_eq!(q.total_in_flight(), 0);
    });
}

/// Quota 1: one racer finds the place held and takes an overflow place, the other finds it freed
/// and makes an entry; only one of them may be admitted.
#[test]
fn racing_acquires_at_the_cap_count_the_actor_once() {
    racing_acquires_at_the_cap(1, [1, 1], true);
}

/// Quota 2, one racer acquiring once and one twice: a racer that makes the entry and finds no
/// overflow place of `a` makes it clean, and `a`'s next acquire is a single CAS that reads
/// nothing else. That skip is safe only because an overflow acquire that missed the cleaning's
/// sketch read must see the entry (the two `SeqCst` fences), and then counts its op there.
#[test]
fn a_clean_entry_skips_the_sketch_only_when_no_shared_place_is_held() {
    racing_acquires_at_the_cap(2, [1, 2], false);
}
