//! Loom models of the adaptive total: releases adding their samples while another thread
//! admits and a window closes, and two admissions racing for the last place under L.
//!
//! The clock is a `ManualClock` (its time an instrumented atomic here), moved before the threads
//! start so that the window is due and any of them may close it.

use admit::fairness::{AdaptiveQuotas, AdaptiveTotal, Priority, Quotas};
use admit::ManualClock;
use loom::thread;
use std::time::Duration;

const TARGET: Duration = Duration::from_millis(1);

fn quotas(clock: &ManualClock, initial: u32) -> AdaptiveQuotas<ManualClock> {
    let total = AdaptiveTotal::new(TARGET)
        .initial(initial)
        .floor(1)
        .ceiling(8);
    Quotas::builder()
        .quota(4)
        .actors(4)
        .model_geometry(2, 4, (7, 11))
        .model_sketch(2)
        .model_sketch_rows(1)
        .build_adaptive_with_clock(total, clock.clone())
        .unwrap()
}

/// Two permits dropped on two threads, each adding a sample two targets long, while a third
/// thread admits: every sample is folded into a window once or still in the open one, the
/// total counts exactly the permits held, and L took at most the one step down the window's
/// samples call for (Invariants 1, 3 and 4).
#[test]
fn samples_are_not_lost_while_a_third_admits() {
    loom::model(|| {
        let clock = ManualClock::new();
        let q = quotas(&clock, 3);
        let a = q.try_acquire_owned_as(b"a", Priority::Critical).unwrap();
        let b = q.try_acquire_owned_as(b"b", Priority::Critical).unwrap();
        clock.advance(TARGET * 2);
        let ta = thread::spawn(move || drop(a));
        let tb = thread::spawn(move || drop(b));
        let c = q.try_acquire_as(b"c", Priority::Critical);
        ta.join().unwrap();
        tb.join().unwrap();
        let (folded, open) = q.model_samples();
        assert_eq!(folded + open, 2, "a sample lost or counted twice");
        assert_eq!(q.in_flight(), u32::from(c.is_ok()));
        let limit = q.limit();
        assert!((2..=3).contains(&limit), "L {limit}");
        // A window that folded a sample two targets long stepped L down.
        assert_eq!(limit == 2, folded > 0, "folded {folded}, L {limit}");
    });
}

/// One place left under L = 2 (one permit held): two threads race for it. At most the
/// places L allows are ever held at once, and the total is exact afterwards (Invariant 1).
#[test]
fn racing_admissions_never_exceed_the_limit() {
    loom::model(|| {
        let clock = ManualClock::new();
        let q = quotas(&clock, 2);
        let held = q.try_acquire_owned_as(b"h", Priority::Critical).unwrap();
        let racers: Vec<_> = [b"x", b"y"]
            .into_iter()
            .map(|actor| {
                let q = q.clone();
                thread::spawn(move || {
                    let p = q.try_acquire_owned_as(actor, Priority::Critical);
                    assert!(q.in_flight() <= 2, "above L");
                    p.ok()
                })
            })
            .collect();
        let admitted: Vec<_> = racers
            .into_iter()
            .filter_map(|r| r.join().unwrap())
            .collect();
        assert_eq!(admitted.len(), 1, "one place under L = 2");
        assert_eq!(q.in_flight(), 2);
        drop(held);
        drop(admitted);
        assert_eq!(q.in_flight(), 0);
    });
}
