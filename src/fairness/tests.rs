//! The fairness bound itself, counted in queue positions, then each rule of the module docs.

use super::*;
use crate::check::fairness::{run, FairnessOp};
use proptest::prelude::*;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

/// A writer's queue that can count, at the moment an op is enqueued, how many ops of the
/// flooder are ahead of it.
#[derive(Default)]
struct CountingQueue<'q> {
    queue: Mutex<VecDeque<(bool, Permit<'q>)>>,
    ready: Condvar,
}

impl<'q> CountingQueue<'q> {
    /// Enqueues; returns how many flood ops were ahead.
    fn push(&self, from_flooder: bool, permit: Permit<'q>) -> usize {
        let mut q = self.queue.lock().unwrap();
        let ahead = q.iter().filter(|(flood, _)| *flood).count();
        q.push_back((from_flooder, permit));
        self.ready.notify_one();
        ahead
    }

    fn pop(&self) -> Option<(bool, Permit<'q>)> {
        self.queue.lock().unwrap().pop_front()
    }
}

/// Floods from one actor while a second actor submits now and then; returns the most flood ops
/// any of the second actor's ops found ahead of it when enqueued.
///
/// `saturated`: other actors hold every place of the table during the flooder's head start,
/// then free them all (the flooder, holding overflow places, can now make an entry), and a
/// churner keeps filling and freeing the table while everyone runs.
fn most_flood_ops_ahead(quotas: &Quotas, saturated: bool) -> usize {
    let queue = CountingQueue::default();
    let human_ops = 200;
    let other = |i: usize| format!("other-{i}").into_bytes();
    let others: Vec<Permit> = (0..if saturated { quotas.actors() } else { 0 })
        .map(|i| quotas.try_acquire(&other(i)).unwrap())
        .collect();
    // The flooder gets a head start: 2,000 attempts before the writer applies anything.
    for _ in 0..2_000 {
        if let Ok(p) = quotas.try_acquire(b"agent") {
            queue.push(true, p);
        }
    }
    if saturated {
        // The table frees while the flooder holds overflow places; it floods again.
        drop(others);
        for _ in 0..2_000 {
            if let Ok(p) = quotas.try_acquire(b"agent") {
                queue.push(true, p);
            }
        }
    }
    // The second actor's first op arrives behind the head start, before the writer runs.
    let mut worst = queue.push(false, quotas.try_acquire(b"human").unwrap());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        // The churner: fills the table with other actors and frees it again, over and over.
        if saturated {
            s.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let held: Vec<Permit> = (0..quotas.actors())
                        .filter_map(|i| quotas.try_acquire(&other(i)).ok())
                        .collect();
                    std::thread::yield_now();
                    drop(held);
                }
            });
        }
        // The writer: applies (drops the permit of) one op at a time.
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some((_, permit)) = queue.pop() {
                    std::hint::black_box(&permit);
                    drop(permit);
                } else {
                    std::thread::yield_now();
                }
            }
        });
        // The flooder: retries as fast as it can.
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(p) = quotas.try_acquire(b"agent") {
                    queue.push(true, p);
                }
            }
        });
        for _ in 0..human_ops {
            loop {
                if let Ok(p) = quotas.try_acquire(b"human") {
                    worst = worst.max(queue.push(false, p));
                    break;
                }
                std::thread::yield_now();
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    worst
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn an_op_waits_behind_at_most_q_ops_of_a_flooding_actor() {
    let q = 8;
    let quotas = Quotas::builder().quota(q).build().unwrap();
    let worst = most_flood_ops_ahead(&quotas, false);
    assert!(
        worst <= q as usize,
        "{worst} flood ops ahead with quota {q}"
    );
}

/// The same bound with the table saturated by other actors, filling and freeing: the flooder's
/// ops are counted against its quota wherever they are held (overflow count or entry).
#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn an_op_waits_behind_at_most_q_ops_of_a_flooding_actor_with_the_table_saturated() {
    let q = 8;
    let quotas = Quotas::builder().quota(q).actors(4).build().unwrap();
    let worst = most_flood_ops_ahead(&quotas, true);
    assert!(
        worst <= q as usize,
        "{worst} flood ops ahead with quota {q}, table saturated"
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn without_a_quota_the_flood_is_ahead_of_everyone() {
    // The same harness with UNLIMITED: the head start alone puts 2,000 ops ahead, which is
    // what makes the bound above a test that can fail.
    let quotas = Quotas::builder().quota(UNLIMITED).build().unwrap();
    assert!(most_flood_ops_ahead(&quotas, false) >= 2_000);
}

#[test]
fn over_the_quota_the_answer_is_immediate_and_names_the_limit() {
    let quotas = Quotas::builder().quota(2).build().unwrap();
    let _a = quotas.try_acquire(b"agent-7").unwrap();
    let _b = quotas.try_acquire(b"agent-7").unwrap();
    let err = quotas.try_acquire(b"agent-7").unwrap_err();
    assert_eq!(
        (err.limit(), err.in_flight(), err.via_overflow()),
        (2, 2, false)
    );
    let text = err.to_string();
    // The refusal owns nothing of the actor: the caller named it, and can say it.
    assert!(
        !text.contains("agent-7") && text.contains("quota") && text.contains('2'),
        "{text}"
    );
    // Another actor is unaffected.
    assert!(quotas.try_acquire(b"human").is_ok());
}

#[test]
fn clones_share_one_table() {
    let a = Quotas::builder().quota(1).build().unwrap();
    let b = a.clone();
    let _p = a.try_acquire(b"x").unwrap();
    assert!(b.try_acquire(b"x").is_err());
    assert_eq!(b.in_flight(b"x"), 1);
}

/// With quota 2, one permit held here and one handed to another thread by `hand_off` (which
/// acquires it, sees two in flight, and has the other thread drop it): that drop frees exactly
/// one place.
fn a_drop_elsewhere_frees_exactly_one_place(hand_off: impl FnOnce(&Quotas)) {
    let quotas = Quotas::builder().quota(2).build().unwrap();
    let p2 = quotas.try_acquire(b"x").unwrap();
    hand_off(&quotas);
    assert_eq!(quotas.in_flight(b"x"), 1);
    let p3 = quotas.try_acquire(b"x").unwrap();
    assert!(
        quotas.try_acquire(b"x").is_err(),
        "one drop freed two places"
    );
    drop((p2, p3));
    assert_eq!((quotas.in_flight(b"x"), quotas.total_in_flight()), (0, 0));
}

#[test]
fn a_permit_frees_exactly_one_place_on_whichever_thread_drops_it() {
    a_drop_elsewhere_frees_exactly_one_place(|quotas| {
        let p1 = quotas.try_acquire(b"x").unwrap();
        assert_eq!(quotas.in_flight(b"x"), 2);
        std::thread::scope(|s| s.spawn(move || p1.complete()).join().unwrap());
    });
}

#[test]
fn an_owned_permit_frees_exactly_one_place_on_a_static_thread() {
    a_drop_elsewhere_frees_exactly_one_place(|quotas| {
        let p1 = quotas.try_acquire_owned(b"x").unwrap();
        assert_eq!(quotas.in_flight(b"x"), 2);
        std::thread::spawn(move || p1.complete()).join().unwrap();
    });
}

#[test]
fn an_owned_permit_outlives_every_handle_and_still_frees_its_place() {
    let quotas = Quotas::builder().quota(1).build().unwrap();
    let watcher = quotas.clone();
    let permit = quotas.try_acquire_owned(b"x").unwrap();
    drop(quotas);
    assert!(watcher.try_acquire(b"x").is_err());
    drop(watcher);
    // The permit alone keeps the table alive; dropping it frees the place and the table.
    assert!(!permit.via_overflow());
    permit.complete();
}

#[test]
fn unlimited_never_rejects_and_overrides_apply_per_actor() {
    let quotas = Quotas::builder()
        .quota(1)
        .override_quota(b"batch-job", UNLIMITED)
        .override_quota(b"vip", 3)
        .build()
        .unwrap();
    let many: u64 = if cfg!(miri) { 100 } else { 10_000 };
    let held: Vec<Permit> = (0..many)
        .map(|_| quotas.try_acquire(b"batch-job").unwrap())
        .collect();
    assert_eq!(quotas.total_in_flight(), many);
    let vip: Vec<Permit> = (0..3)
        .map(|_| quotas.try_acquire(b"vip").unwrap())
        .collect();
    assert!(quotas.try_acquire(b"vip").is_err());
    assert_eq!(quotas.limit_of(b"vip"), 3);
    assert_eq!(quotas.limit_of(b"anyone"), 1);
    drop((held, vip));
    assert_eq!(quotas.total_in_flight(), 0);
}

#[test]
fn when_every_place_is_busy_actors_share_the_overflow_quota() {
    let quotas = Quotas::builder().quota(2).actors(2).build().unwrap();
    let _a = quotas.try_acquire(b"a").unwrap();
    let _b = quotas.try_acquire(b"b").unwrap();
    assert_eq!(quotas.live_actors(), 2);
    let c = quotas.try_acquire(b"c").unwrap();
    let d = quotas.try_acquire(b"d").unwrap();
    assert!(c.via_overflow() && d.via_overflow());
    let err = quotas.try_acquire(b"e").unwrap_err();
    assert!(err.via_overflow(), "the overflow quota is capped by Q too");
    assert_eq!(err.in_flight(), 2);
    assert!(err.to_string().contains("overflow quota"));
    drop(c);
    assert!(quotas.try_acquire(b"e").is_ok());
}

#[test]
fn bad_settings_are_named_errors() {
    assert_eq!(
        Quotas::builder().quota(0).build().unwrap_err(),
        QuotasConfigError::ZeroQuota
    );
    assert_eq!(
        Quotas::builder()
            .override_quota(b"x", 0)
            .build()
            .unwrap_err(),
        QuotasConfigError::ZeroQuota
    );
    assert_eq!(
        Quotas::builder().actors(0).build().unwrap_err(),
        QuotasConfigError::ZeroActors
    );
    assert!(matches!(
        Quotas::builder().actors(usize::MAX).build(),
        Err(QuotasConfigError::TooManyActors { .. })
    ));
    assert!(QuotasConfigError::ZeroActors
        .to_string()
        .contains("`actors`"));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn a_churn_of_a_million_actor_names_leaves_memory_fixed() {
    let quotas = Quotas::new();
    let memory = quotas.memory_bytes();
    let names: u32 = if cfg!(miri) { 3_000 } else { 1_000_000 };
    for i in 0..names {
        let p = quotas.try_acquire(&i.to_le_bytes()).unwrap();
        assert!(
            !p.via_overflow(),
            "name {i}: zero entries were not reclaimed for it"
        );
        drop(p);
        assert!(quotas.live_actors() <= DEFAULT_ACTORS);
    }
    assert_eq!(quotas.memory_bytes(), memory);
    assert_eq!(quotas.total_in_flight(), 0);
}

/// With every place busy, a miss scans for zero entries only once per `actors` entry-less
/// acquires, so an adversary cannot buy a scan of the table with every acquire; in between,
/// entry-less actors share the overflow quota.
#[test]
fn reclamation_scans_are_paced_by_entry_less_acquires() {
    let quotas = Quotas::builder().quota(8).actors(4).build().unwrap();
    let busy: Vec<Permit> = (0..4u8)
        .map(|i| quotas.try_acquire(&[i]).unwrap())
        .collect();
    let mut busy = busy.into_iter();
    // Actor 0 goes idle; the first miss at the cap is due a scan: it reclaims 0's entry.
    drop(busy.next());
    let new = quotas.try_acquire(b"new").unwrap();
    assert!(!new.via_overflow());
    assert_eq!(quotas.in_flight(&[0]), 0);
    // Actor 1 goes idle, but the next scan is due only 4 entry-less acquires after the last
    // one (the insert that followed it was the first of them).
    drop(busy.next());
    let early: Vec<Permit> = (0..2)
        .map(|i| quotas.try_acquire(&[10 + i]).unwrap())
        .collect();
    assert!(
        early.iter().all(Permit::via_overflow),
        "scanned before it was due"
    );
    // The next one is due: it reclaims actor 1's zero entry and takes its place.
    let due = quotas.try_acquire(b"due").unwrap();
    assert!(!due.via_overflow());
}

#[test]
fn wait_idle_returns_once_nothing_is_in_flight() {
    let quotas = Quotas::new();
    let held: Vec<Permit> = (0..3u8)
        .map(|i| quotas.try_acquire(&[i]).unwrap())
        .collect();
    let waiter = {
        let quotas = quotas.clone();
        std::thread::spawn(move || {
            quotas.wait_idle();
            quotas.total_in_flight()
        })
    };
    for permit in held {
        permit.complete();
    }
    assert_eq!(waiter.join().unwrap(), 0);
    quotas.wait_idle(); // idle already: returns at once
}

/// The drain racing the releases that bring counts to zero, many times over: a lost wake-up
/// would hang this test.
#[test]
fn wait_idle_never_misses_the_last_release() {
    let quotas = Quotas::new();
    let rounds = if cfg!(miri) { 3 } else { 2_000 };
    for round in 0..rounds {
        let held: Vec<OwnedPermit> = (0..3u8)
            .map(|i| quotas.try_acquire_owned(&[i]).unwrap())
            .collect();
        let writer = std::thread::spawn(move || drop(held));
        quotas.wait_idle();
        assert_eq!(quotas.total_in_flight(), 0, "round {round}");
        writer.join().unwrap();
    }
}

#[test]
fn fairness_scenario_runs() {
    use FairnessOp::{Acquire, Release};
    run(
        2,
        2,
        &[(5, 1)],
        &[
            Acquire { actor: 1 },
            Acquire { actor: 1 },
            Acquire { actor: 1 },
            Acquire { actor: 2 },
            Acquire { actor: 3 },
            Acquire { actor: 4 },
            Acquire { actor: 5 },
            Release { index: 0 },
            Acquire { actor: 5 },
            Release { index: 3 },
            Release { index: 1 },
        ],
    );
}

fn op_strategy() -> impl Strategy<Value = FairnessOp> {
    prop_oneof![
        4 => (0u32..8).prop_map(|actor| FairnessOp::Acquire { actor }),
        1 => any::<u32>().prop_map(|actor| FairnessOp::Acquire { actor }),
        1 => (0u32..8).prop_map(|actor| FairnessOp::StaleAcquire { actor }),
        4 => any::<u16>().prop_map(|index| FairnessOp::Release { index }),
        1 => (0u32..6).prop_map(|limit| FairnessOp::SetQuota { limit }),
        1 => (0u32..10, proptest::option::of(prop_oneof![0u32..6, Just(crate::fairness::UNLIMITED)]))
            .prop_map(|(actor, limit)| FairnessOp::SetOverride { actor, limit }),
    ]
}

proptest! {
    #![proptest_config(crate::check::proptest_config(256))]

    /// Identical admissions, counts, table sizes and overflow counts to the reference; every
    /// entry gone once its last permit is (see `check::fairness::run`).
    #[cfg_attr(
        miri,
        ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
    )]
    #[test]
    fn matches_the_reference_model(
        limit in prop_oneof![1u32..5, Just(UNLIMITED)],
        actors in 1usize..10,
        overrides in proptest::collection::vec((0u32..8, prop_oneof![1u32..5, Just(UNLIMITED)]), 0..3),
        ops in proptest::collection::vec(op_strategy(), 1..200),
    ) {
        run(limit, actors, &overrides, &ops);
    }
}

#[test]
fn both_permits_can_travel_to_the_writer_thread() {
    fn send<T: Send>() {}
    send::<Permit<'static>>();
    send::<OwnedPermit>();
    send::<Quotas>();
    // A writer in a scope takes borrowing permits; a 'static one takes owned permits.
    let quotas = Quotas::new();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        tx.send(quotas.try_acquire(b"a").unwrap()).unwrap();
        drop(tx);
        s.spawn(move || rx.into_iter().for_each(Permit::complete));
    });
    let owned = quotas.try_acquire_owned(b"a").unwrap();
    std::thread::spawn(move || owned.complete()).join().unwrap();
    assert_eq!(quotas.total_in_flight(), 0);
}

/// A full table (8 places) with racing first uses of 40 actors that churn
/// through it, each op held briefly and released on the acquiring thread. `live` is given back
/// exactly once per entry: it never exceeds the cap or wraps, nothing stays counted once every
/// permit is dropped, and the table still admits new actors afterwards.
#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn a_full_table_with_racing_first_uses_frees_each_place_once() {
    let q = Quotas::builder().quota(4).actors(8).build().unwrap();
    let rounds = 100_000u32;
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let q = &q;
            s.spawn(move || {
                let mut held = Vec::new();
                for i in 0..rounds {
                    let actor = (i.wrapping_mul(2_654_435_761) ^ t) % 40;
                    if let Ok(p) = q.try_acquire(&actor.to_le_bytes()) {
                        held.push(p);
                    }
                    if held.len() > 3 || i % 5 == 0 {
                        held.clear();
                    }
                    assert!(q.live_actors() <= q.actors(), "live wrapped");
                }
            });
        }
    });
    assert_eq!(q.total_in_flight(), 0, "a count was lost or leaked");
    assert!(q.live_actors() <= q.actors());
    for actor in 100..140u32 {
        drop(q.try_acquire(&actor.to_le_bytes()).unwrap());
    }
    q.wait_idle();
}

/// The scenario: quota 4, one place, held by another actor. `a` fills the overflow count
/// with 4 ops; the other actor releases, `a` gets the place as its entry: not one more of its
/// ops may be admitted there while its 4 shared ones are in flight.
#[test]
fn an_actor_holding_shared_places_gets_no_more_through_a_new_entry() {
    let quotas = Quotas::builder().quota(4).actors(1).build().unwrap();
    let hog = quotas.try_acquire(b"hog").unwrap();
    let shared: Vec<Permit> = (0..10)
        .filter_map(|_| quotas.try_acquire(b"a").ok())
        .collect();
    assert!(shared.iter().all(Permit::via_overflow));
    assert_eq!(shared.len(), 4);
    drop(hog);
    let entry: Vec<Permit> = (0..10)
        .filter_map(|_| quotas.try_acquire(b"a").ok())
        .collect();
    assert!(
        shared.len() + entry.len() <= 4,
        "actor a has {} shared + {} entry ops in flight with quota 4",
        shared.len(),
        entry.len()
    );
    // Its shared ops decided, `a` has its whole quota again, in its entry.
    drop(shared);
    let again: Vec<Permit> = (0..10)
        .filter_map(|_| quotas.try_acquire(b"a").ok())
        .collect();
    assert_eq!(again.len() + entry.len(), 4);
    assert!(again.iter().all(|p| !p.via_overflow()));
}

/// An override below the default binds on the overflow count too: the overflow count is capped by
/// the default quota, but one actor's share of it by that actor's own quota.
#[test]
fn an_override_quota_binds_on_the_shared_count() {
    let quotas = Quotas::builder()
        .quota(8)
        .actors(1)
        .override_quota(b"a", 2)
        .build()
        .unwrap();
    let _hog = quotas.try_acquire(b"hog").unwrap();
    let shared: Vec<Permit> = (0..10)
        .filter_map(|_| quotas.try_acquire(b"a").ok())
        .collect();
    assert!(
        shared.len() <= 2,
        "actor a (quota 2) has {} ops in flight through the overflow count",
        shared.len()
    );
    let err = quotas.try_acquire(b"a").unwrap_err();
    assert_eq!((err.limit(), err.in_flight()), (2, 2));
    // Others still share what is left of the overflow count.
    assert!(quotas.try_acquire(b"b").is_ok());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "full-size arrays: minutes under miri; the ordinary run covers it"
)]
fn a_builder_never_prints_its_hash_keys() {
    // The keys are the whole defence against aimed collisions (see "Keys" in `table`).
    let (k0, k1) = (0x1234_5678_9abc_def0_u64, 0x0fed_cba9_8765_4321_u64);
    let builder = Quotas::builder().model_geometry(8, 16, (k0, k1));
    let text = format!("{builder:?}");
    assert!(
        !text.contains(&k0.to_string()) && !text.contains(&k1.to_string()),
        "{text}"
    );
    assert!(!format!("{:?}", Quotas::new()).contains("k0"));
}
