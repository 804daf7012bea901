//! Fairness quotas against a sequential reference: a `HashMap` of counts with the same table
//! capacity, zero counts kept until a paced scan reclaims them, and a shared overflow count
//! capped by the quota.

use super::bytes::ByteReader;
use crate::fairness::{Permit, Quotas, UNLIMITED};
use std::collections::HashMap;

/// One step of a quota history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairnessOp {
    /// Try to admit one op of `actor`.
    Acquire { actor: u32 },
    /// Drop the `index`-th held permit (modulo how many are held), as the writer deciding it.
    Release { index: u16 },
}

/// Where the reference counted an admitted op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Entry,
    Shared,
    Unlimited,
}

/// The reference: counts per actor, kept at zero until a paced scan reclaims them.
pub struct RefQuotas {
    limit: u32,
    actors: usize,
    pub counts: HashMap<u32, u32>,
    pub shared: u32,
    pub unlimited: u32,
    absent: u64,
    next_scan: u64,
}

impl RefQuotas {
    pub fn new(limit: u32, actors: usize) -> Self {
        Self {
            limit,
            actors,
            counts: HashMap::new(),
            shared: 0,
            unlimited: 0,
            absent: 0,
            next_scan: 0,
        }
    }

    pub fn acquire(&mut self, actor: u32) -> Option<Place> {
        if self.limit == UNLIMITED {
            self.unlimited += 1;
            return Some(Place::Unlimited);
        }
        if let Some(count) = self.counts.get_mut(&actor) {
            if *count < self.limit {
                *count += 1;
                return Some(Place::Entry);
            }
            return None;
        }
        if self.counts.len() >= self.actors {
            // At the cap: a miss counts as an entry-less acquire and may run the paced scan.
            self.absent += 1;
            if self.absent < self.next_scan {
                return self.acquire_shared();
            }
            self.next_scan = self.absent + self.actors as u64;
            self.counts.retain(|_, count| *count > 0);
            if self.counts.len() >= self.actors {
                return self.acquire_shared();
            }
        }
        self.absent += 1;
        self.counts.insert(actor, 1);
        Some(Place::Entry)
    }

    fn acquire_shared(&mut self) -> Option<Place> {
        if self.shared < self.limit {
            self.shared += 1;
            return Some(Place::Shared);
        }
        None
    }

    pub fn release(&mut self, actor: u32, place: Place) {
        match place {
            Place::Entry => *self.counts.get_mut(&actor).unwrap() -= 1,
            Place::Shared => self.shared -= 1,
            Place::Unlimited => self.unlimited -= 1,
        }
    }
}

fn actor_name(actor: u32) -> [u8; 4] {
    actor.to_le_bytes()
}

/// Runs `ops` through real quotas and the reference, asserting identical admissions, counts,
/// table sizes, shared counts and totals after every step; then drops everything and checks
/// the quotas are idle and empty.
pub fn run(limit: u32, actors: usize, ops: &[FairnessOp]) {
    let quotas = Quotas::builder()
        .quota(limit)
        .actors(actors)
        .model_geometry(crate::table::SLOTS_PER_ENTRY, usize::MAX, (1, 2))
        .build()
        .unwrap();
    let mut reference = RefQuotas::new(limit, actors);
    let mut held: Vec<(u32, Place, Permit)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            FairnessOp::Acquire { actor } => {
                let name = actor_name(actor);
                let got = quotas.try_acquire(&name);
                let want = reference.acquire(actor);
                match (got, want) {
                    (Ok(permit), Some(place)) => {
                        assert_eq!(permit.is_shared(), place == Place::Shared, "step {step}");
                        held.push((actor, place, permit));
                    }
                    (Err(e), None) => {
                        assert_eq!(e.actor(), &name[..]);
                        assert_eq!(e.limit(), limit);
                        // Refused exactly at the quota, never below it.
                        assert_eq!(e.in_flight(), limit, "step {step}");
                    }
                    (got, want) => panic!("step {step} {op:?}: got {got:?}, want {want:?}"),
                }
            }
            FairnessOp::Release { index } => {
                if held.is_empty() {
                    continue;
                }
                let (actor, place, permit) = held.swap_remove(usize::from(index) % held.len());
                permit.complete();
                reference.release(actor, place);
            }
        }
        assert_eq!(
            quotas.live_actors(),
            reference.counts.len(),
            "step {step}: entries"
        );
        assert!(
            quotas.live_actors() <= actors,
            "step {step}: above capacity"
        );
        assert_eq!(
            quotas.shared_in_flight(),
            reference.shared,
            "step {step}: shared"
        );
        assert!(reference.shared <= limit, "step {step}: shared above quota");
        assert_eq!(
            quotas.total_in_flight(),
            held.len() as u64,
            "step {step}: total"
        );
        for (&actor, &count) in &reference.counts {
            assert_eq!(
                quotas.in_flight(&actor_name(actor)),
                count,
                "step {step}: count"
            );
            assert!(count <= limit, "step {step}: above quota");
        }
    }
    drop(held);
    assert_eq!(quotas.total_in_flight(), 0);
    for &actor in reference.counts.keys() {
        assert_eq!(
            quotas.in_flight(&actor_name(actor)),
            0,
            "a count outlived its permits"
        );
    }
    quotas.wait_idle();
}

/// Decodes fuzzer bytes: a quota of 1..=4 (or unlimited), 1..=12 actor places, up to 400 ops
/// over actors from a small space (contention) or a large one (churn).
pub fn decode(data: &[u8]) -> (u32, usize, Vec<FairnessOp>) {
    let mut r = ByteReader::new(data);
    let limit = match r.u8() % 6 {
        5 => UNLIMITED,
        l => u32::from(l) + 1,
    };
    let actors = usize::from(r.u8() % 12) + 1;
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 400 {
        ops.push(match r.u8() % 4 {
            0 | 1 => FairnessOp::Acquire {
                actor: u32::from(r.u8() % 16),
            },
            2 => FairnessOp::Acquire { actor: r.u32() },
            _ => FairnessOp::Release { index: r.u16() },
        });
    }
    (limit, actors, ops)
}

/// The `fairness` fuzz target's body.
pub fn fuzz_fairness(data: &[u8]) {
    let (limit, actors, ops) = decode(data);
    run(limit, actors, &ops);
}
