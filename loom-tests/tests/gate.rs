//! Loom models of the gate's rollback: two admissions of one actor racing, one of them refused
//! by a later defence after it took an earlier one. Whatever the interleaving, the refused one
//! gives back what it took, so the actor ends holding exactly what the admitted one took.
//!
//! Tables are two slots (`geometry(1, 2)`, cap 2), hash keys fixed, the volume quota four counters,
//! and each model keeps only the two defences it races: the protocol does not depend on
//! sizes. The clock stands at `NOW`, the reading every admission uses.

use admit::fairness::Quotas;
use admit::gate::{Gate, GateRefused};
use admit::quota::{Quota, RateLimit};
use admit::{BucketConfig, Limiter, ManualClock};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

const MS: u64 = 1_000_000;
const NOW: u64 = 1_000 * MS;

/// A gate of the defences given (`None` leaves one out): each model keeps only the two it
/// races, so that its state space stays small.
fn gate(quota: Option<u32>, burst: u32, events: Option<u32>) -> Arc<Gate<ManualClock>> {
    let clock = ManualClock::starting_at(NOW);
    let limiter = Limiter::builder()
        // Room for both racers' copies of `a`, so that the insert protocol (not the cap)
        // settles which one is the member: at a cap of 1 a racer may be sent to the
        // overflow bucket, a second budget the model would then have to count.
        .cap(2)
        .geometry(1, 2)
        .hash_keys(7, 11)
        .build_with_clock(
            [BucketConfig::new(burst, Duration::from_secs(60)).unwrap()],
            clock.clone(),
        )
        .unwrap();
    let mut gate = Gate::new().rate(limiter, 0);
    if let Some(quota) = quota {
        gate = gate.in_flight(
            Quotas::builder()
                .quota(quota)
                .actors(2)
                .model_geometry(1, 2, (7, 11))
                .build()
                .unwrap(),
        );
    }
    if let Some(events) = events {
        gate = gate.volume(
            RateLimit::loom_with_geometry(
                Quota::new(events, 1_000, Duration::from_secs(60)).unwrap(),
                4,
                (7, 11),
                clock,
            )
            .unwrap(),
        );
    }
    Arc::new(gate)
}

/// Two racing admissions of `a`; returns the passes won and the refusals, by defence.
fn race(gate: &Arc<Gate<ManualClock>>) -> (usize, Vec<&'static str>) {
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let gate = gate.clone();
            thread::spawn(move || match gate.try_acquire_at("a", 1, NOW) {
                // Held to the end of the thread, then freed: a decided op.
                Ok(pass) => {
                    drop(pass);
                    Ok(())
                }
                Err(GateRefused::InFlight(_)) => Err("in flight"),
                Err(GateRefused::Rate(_)) => Err("rate"),
                Err(GateRefused::Volume(_)) => Err("volume"),
            })
        })
        .collect();
    let mut admitted = 0;
    let mut refused = Vec::new();
    for t in threads {
        match t.join().unwrap() {
            Ok(()) => admitted += 1,
            Err(by) => refused.push(by),
        }
    }
    (admitted, refused)
}

/// Tokens `a` holds at `NOW`, as the limiter accounts for them.
fn tokens(gate: &Gate<ManualClock>) -> u32 {
    let (limiter, class) = gate.limiter().unwrap();
    limiter.peek_at("a", class, 1, NOW).unwrap().available()
}

/// Burst 1: one admission takes the token, the other is refused by the rate limiter after it
/// took an in-flight place, and gives the place back.
#[test]
fn two_admissions_racing_with_one_refused() {
    loom::model(|| {
        let gate = gate(Some(2), 1, None);
        let (admitted, refused) = race(&gate);
        assert_eq!(admitted, 1);
        assert_eq!(refused, ["rate"]);
        assert_eq!(
            gate.quotas().unwrap().total_in_flight(),
            0,
            "a place was kept"
        );
        assert_eq!(tokens(&gate), 0, "one token taken, none minted");
    });
}

/// Burst 2, one event per window, no in-flight quotas: both take a token, one is refused by
/// the volume quota and refunds its token while the other's take may be racing it.
#[test]
fn a_refund_racing_a_take_restores_exactly_one_token() {
    loom::model(|| {
        let gate = gate(None, 2, Some(1));
        let (admitted, refused) = race(&gate);
        assert_eq!(admitted, 1);
        assert_eq!(refused, ["volume"]);
        assert_eq!(tokens(&gate), 1, "burst 2, one admitted: one token left");
        let usage = gate.volume_quota().unwrap().usage_at("a", NOW).unwrap();
        assert_eq!(usage.events, 1, "only the admitted one was counted");
    });
}
