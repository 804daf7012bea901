//! Loom models of the gate's rollback: two admissions of one actor racing, one of them refused
//! by a later defence after it took an earlier one. Whatever the interleaving, the refused one
//! gives back what it took, so the actor ends holding exactly what the admitted one took.
//!
//! Tables are one slot (`geometry(1, 1)`), hash keys fixed, the volume quota four counters,
//! and each model keeps only the two defences it races: the protocol does not depend on
//! sizes. The clock stands at `NOW`, the reading every admission uses. One admission of `a`
//! runs before the threads start, so `a` already has its entries: the racers meet on the
//! gate's own steps (take, refuse, give back), not on the tables' insert protocol, which
//! `limiter.rs`, `fairness.rs` and `saturation.rs` model on their own.

use admit::fairness::Quotas;
use admit::gate::{Admission, Gate, GateRefused, KeyKind, Limit};
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
        .cap(1)
        .geometry(1, 1)
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
                .actors(1)
                .model_geometry(1, 1, (7, 11))
                .build()
                .unwrap(),
        );
    }
    if let Some(events) = events {
        gate = gate.volume(
            RateLimit::loom_with_geometry(
                // One row: an actor's charge is two words (events, bytes), not eight; the
                // quota's own models cover the rows (`quota.rs`).
                Quota::new(events, 1_000, Duration::from_secs(60))
                    .and_then(|q| q.with_rows(1))
                    .unwrap(),
                4,
                (7, 11),
                clock,
            )
            .unwrap(),
        );
    }
    Arc::new(gate)
}

/// One admission of `a` (decided at once), then two racing ones; returns the passes the
/// racers won and their refusals, by defence.
fn race(gate: &Arc<Gate<ManualClock>>) -> (usize, Vec<&'static str>) {
    drop(gate.try_acquire_at("a", 1, NOW).unwrap());
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let gate = gate.clone();
            thread::spawn(move || match gate.try_acquire_at("a", 1, NOW) {
                // Held to the end of the thread, then freed: a decided op.
                Ok(pass) => {
                    drop(pass);
                    Ok(())
                }
                Err(GateRefused::InFlight { .. }) => Err("in flight"),
                Err(GateRefused::Rate { .. }) => Err("rate"),
                Err(GateRefused::Volume { .. }) => Err("volume"),
                Err(GateRefused::MissingKey { .. }) => Err("missing key"),
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

/// Burst 2, one token spent before the race: one racer takes the last token, the other is
/// refused by the rate limiter after it took an in-flight place, and gives the place back.
#[test]
fn two_admissions_racing_with_one_refused() {
    loom::model(|| {
        let gate = gate(Some(2), 2, None);
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

/// Burst 3 and two events per window, one of each spent before the race, no in-flight
/// quotas: both racers take a token, one is refused by the volume quota and refunds its token
/// while the other's take may be racing it. The refund is exact if nothing landed on the
/// entry between its take and it (one token left), and void if the other take did (none
/// left): never a token the take did not remove.
#[test]
fn a_refund_racing_a_take_is_exact_or_void() {
    loom::model(|| {
        let gate = gate(None, 3, Some(2));
        let (admitted, refused) = race(&gate);
        assert_eq!(admitted, 1);
        assert_eq!(refused, ["volume"]);
        let left = tokens(&gate);
        assert!(left <= 1, "burst 3, two admitted: {left} tokens left");
        let usage = gate.volume_quota().unwrap().usage_at("a", NOW).unwrap();
        assert_eq!(usage.events, 2, "only the admitted ones were counted");
    });
}

/// Two claims behind one source: the rate is keyed by the source (burst 3), the in-flight
/// place and the volume by the claim (one event a window). Before the race `b` spends its
/// event (and the source a token). Then `a` and `b` race from the source: `a` is admitted,
/// `b` takes a source token and a place, is refused by its own volume quota, and gives both
/// back while `a`'s take may race its refund: the source keeps at most the token `a` took
/// beside the one spent before (exact) or loses `b`'s too (void), never gains one; no place
/// is kept, and only `a`'s event is counted.
#[test]
fn two_claims_sharing_a_source_one_refused() {
    loom::model(|| {
        let clock = ManualClock::starting_at(NOW);
        let limiter = Limiter::builder()
            .cap(2)
            .geometry(1, 2)
            .hash_keys(7, 11)
            .build_with_clock(
                [BucketConfig::new(3, Duration::from_secs(60)).unwrap()],
                clock.clone(),
            )
            .unwrap();
        let quotas = Quotas::builder()
            .quota(1)
            .actors(2)
            .model_geometry(1, 2, (7, 11))
            .build()
            .unwrap();
        let volume = RateLimit::loom_with_geometry(
            Quota::new(1, 1_000, Duration::from_secs(60))
                .and_then(|q| q.with_rows(1))
                .unwrap(),
            4,
            (7, 11),
            clock,
        )
        .unwrap();
        let gate = Arc::new(
            Gate::new()
                .in_flight(quotas)
                .rates(limiter, [Limit::new("per source", 0)])
                .unwrap()
                .volume(volume),
        );
        drop(gate.try_admit_at(&Admission::new("b", "s"), NOW).unwrap());
        let threads: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|claim| {
                let gate = gate.clone();
                thread::spawn(move || {
                    gate.try_admit_at(&Admission::new(claim, "s"), NOW)
                        .map(drop)
                        .map_err(|refused| refused.key_kind())
                })
            })
            .collect();
        let answers: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(
            answers,
            [Ok(()), Err(KeyKind::Claim)],
            "b refused by its claim's volume"
        );
        assert_eq!(
            gate.quotas().unwrap().total_in_flight(),
            0,
            "a place was kept"
        );
        let (limiter, class) = gate.limiter().unwrap();
        let left = limiter.peek_at("s", class, 1, NOW).unwrap().available();
        assert!(
            left <= 1,
            "burst 3, two admitted from the source: {left} tokens left"
        );
        let volume = gate.volume_quota().unwrap();
        assert_eq!(volume.usage_at("a", NOW).unwrap().events, 1);
        assert_eq!(
            volume.usage_at("b", NOW).unwrap().events,
            1,
            "b's refusal counted nothing"
        );
    });
}
