//! Fairness quotas against a sequential reference: a `HashMap` of entries with the same table
//! capacity, zero counts kept until a paced scan reclaims them, a shared overflow count capped
//! by the default quota, and each actor's overflow places counted exactly (for the invariant) and
//! in a copy of the sketch's cells (to predict its over-estimates).

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
    /// The default quota changes at runtime (0 is refused).
    SetQuota { limit: u32 },
    /// `actor`'s override is set or removed at runtime.
    SetOverride { actor: u32, limit: Option<u32> },
    /// One op of `actor`, by an acquire that read the default quota and the overrides before
    /// the latest change taken and lands after it: it decides wholly under what it read.
    StaleAcquire { actor: u32 },
}

/// A change taken, as a setting before and after it: what a [`FairnessOp::StaleAcquire`]
/// read, and what it lands under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setting {
    Quota(u32),
    Override(u32, Option<u32>),
}

impl Setting {
    /// Puts the setting in force on the real quotas and on the reference: a plain store of
    /// the default, or of an override in the slot its actor already holds, so a decision made
    /// under it is the one an acquire that read it makes (an acquire reads the default once
    /// and its actor's override once, see "Limits changed at runtime" in
    /// `fairness/reconfig.rs`).
    fn apply(self, quotas: &Quotas, reference: &mut RefQuotas) {
        match self {
            Self::Quota(limit) => {
                quotas.set_quota(limit).unwrap();
                assert!(reference.set_quota(limit));
            }
            Self::Override(actor, limit) => {
                quotas.set_override(&actor_name(actor), limit).unwrap();
                assert!(reference.set_override(actor, limit));
            }
        }
    }
}

/// Override slots the checked quotas are built with: small, so a run reaches the capacity.
pub const OVERRIDE_CAPACITY: usize = 3;

/// Where the reference counted an admitted op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Entry,
    Shared,
    Unlimited,
}

/// Why the reference refused an op: the limit hit and the count it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub limit: u32,
    pub in_flight: u32,
    pub shared: bool,
}

/// An actor's entry: its count and whether it may still hold overflow places (DIRTY).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub count: u32,
    pub dirty: bool,
}

/// The reference: entries kept at zero until a paced scan reclaims them, overflow places by actor.
pub struct RefQuotas {
    limit: u32,
    actors: usize,
    overrides: HashMap<u32, u32>,
    pub entries: HashMap<u32, Entry>,
    pub shared: u32,
    /// Each actor's overflow places, exactly.
    pub shared_of: HashMap<u32, u32>,
    /// The sketch's cells, as the real one counts them.
    pub cells: HashMap<usize, u32>,
    pub unlimited: u32,
    absent: u64,
    next_scan: u64,
    /// Actors ever given an override: each holds one of [`OVERRIDE_CAPACITY`] slots.
    ever_overridden: std::collections::HashSet<u32>,
}

impl RefQuotas {
    pub fn new(limit: u32, actors: usize, overrides: &[(u32, u32)]) -> Self {
        Self {
            limit,
            actors,
            overrides: overrides.iter().copied().collect(),
            entries: HashMap::new(),
            shared: 0,
            shared_of: HashMap::new(),
            cells: HashMap::new(),
            unlimited: 0,
            absent: 0,
            next_scan: 0,
            ever_overridden: overrides.iter().map(|&(a, _)| a).collect(),
        }
    }

    /// The default quota changes (`false`: refused). The rules of "Limits changed at runtime" in
    /// `fairness/reconfig.rs` are simply that every later acquire reads the new one.
    pub fn set_quota(&mut self, limit: u32) -> bool {
        if limit == 0 {
            return false;
        }
        self.limit = limit;
        true
    }

    /// `actor`'s override changes (`false`: refused, a quota of 0 or a new actor beyond the
    /// slots).
    pub fn set_override(&mut self, actor: u32, limit: Option<u32>) -> bool {
        if limit == Some(0) {
            return false;
        }
        match limit {
            None => {
                self.overrides.remove(&actor);
            }
            Some(l) => {
                if !self.ever_overridden.contains(&actor)
                    && self.ever_overridden.len() >= OVERRIDE_CAPACITY
                {
                    return false;
                }
                self.ever_overridden.insert(actor);
                self.overrides.insert(actor, l);
            }
        }
        true
    }

    pub fn limit_of(&self, actor: u32) -> u32 {
        self.overrides.get(&actor).copied().unwrap_or(self.limit)
    }

    /// The sketch's estimate of an actor's overflow places: the smallest of its cells.
    fn estimate(&self, cells: &[usize]) -> u32 {
        cells
            .iter()
            .map(|c| self.cells.get(c).copied().unwrap_or(0))
            .min()
            .unwrap_or(0)
    }

    /// Admits one op of `actor`, whose sketch cells are `cells`.
    pub fn acquire(&mut self, actor: u32, cells: &[usize]) -> Result<Place, Refusal> {
        let limit = self.limit_of(actor);
        if limit == UNLIMITED {
            self.unlimited += 1;
            return Ok(Place::Unlimited);
        }
        if !self.entries.contains_key(&actor) {
            if self.entries.len() >= self.actors {
                // At the cap: a miss counts as an entry-less acquire and may run the paced scan.
                self.absent += 1;
                if self.absent < self.next_scan {
                    return self.acquire_shared(actor, limit, cells);
                }
                self.next_scan = self.absent + self.actors as u64;
                self.entries.retain(|_, e| e.count > 0);
                if self.entries.len() >= self.actors {
                    return self.acquire_shared(actor, limit, cells);
                }
            }
            self.absent += 1;
            // Born DIRTY: the actor may hold overflow places.
            self.entries.insert(
                actor,
                Entry {
                    count: 0,
                    dirty: true,
                },
            );
        }
        let estimate = self.estimate(cells);
        let entry = self.entries.get_mut(&actor).unwrap();
        let refused = |in_flight| Refusal {
            limit,
            in_flight,
            shared: false,
        };
        if entry.count >= limit {
            return Err(refused(entry.count));
        }
        if entry.dirty {
            if estimate == 0 {
                entry.dirty = false;
            } else if entry.count + 1 + estimate > limit {
                return Err(refused(entry.count + estimate));
            }
        }
        entry.count += 1;
        Ok(Place::Entry)
    }

    fn acquire_shared(
        &mut self,
        actor: u32,
        limit: u32,
        cells: &[usize],
    ) -> Result<Place, Refusal> {
        if self.shared >= self.limit {
            return Err(Refusal {
                limit: self.limit,
                in_flight: self.shared,
                shared: true,
            });
        }
        let estimate = self.estimate(cells);
        if estimate + 1 > limit {
            return Err(Refusal {
                limit,
                in_flight: estimate,
                shared: false,
            });
        }
        self.shared += 1;
        *self.shared_of.entry(actor).or_default() += 1;
        for &c in cells {
            *self.cells.entry(c).or_default() += 1;
        }
        Ok(Place::Shared)
    }

    pub fn release(&mut self, actor: u32, place: Place, cells: &[usize]) {
        match place {
            Place::Entry => self.entries.get_mut(&actor).unwrap().count -= 1,
            Place::Shared => {
                self.shared -= 1;
                *self.shared_of.get_mut(&actor).unwrap() -= 1;
                for c in cells {
                    *self.cells.get_mut(c).unwrap() -= 1;
                }
            }
            Place::Unlimited => self.unlimited -= 1,
        }
    }
}

fn actor_name(actor: u32) -> [u8; 4] {
    actor.to_le_bytes()
}

/// Runs `ops` through real quotas and the reference, asserting identical admissions and
/// refusals, counts, table sizes, overflow counts and totals after every step, and that no actor
/// ever has more ops in flight than its quota, counted wherever they are held (its entry and
/// the overflow count); then drops everything and checks the quotas are idle and empty.
/// `overrides` are `(actor, quota)` pairs.
pub fn run(limit: u32, actors: usize, overrides: &[(u32, u32)], ops: &[FairnessOp]) {
    let mut builder = Quotas::builder()
        .quota(limit)
        .actors(actors)
        .override_capacity(OVERRIDE_CAPACITY)
        .model_geometry(
            crate::table::geometry::MODEL_SLOTS_PER_ENTRY,
            usize::MAX,
            (1, 2),
        );
    for &(actor, quota) in overrides {
        builder = builder.override_quota(&actor_name(actor), quota);
    }
    let quotas = builder.build().unwrap();
    let mut reference = RefQuotas::new(limit, actors, overrides);
    let mut held: Vec<(u32, Place, Permit)> = Vec::new();
    // The latest change taken, as the setting before it and after it.
    let mut last: Option<(Setting, Setting)> = None;
    for (step, op) in ops.iter().enumerate() {
        match *op {
            FairnessOp::Acquire { actor } => {
                acquire(&quotas, &mut reference, &mut held, actor, step);
            }
            FairnessOp::StaleAcquire { actor } => {
                // In force for this acquire only: the setting before the latest change.
                if let Some((before, after)) = last {
                    before.apply(&quotas, &mut reference);
                    acquire(&quotas, &mut reference, &mut held, actor, step);
                    after.apply(&quotas, &mut reference);
                } else {
                    acquire(&quotas, &mut reference, &mut held, actor, step);
                }
            }
            FairnessOp::Release { index } => {
                if held.is_empty() {
                    continue;
                }
                let (actor, place, permit) = held.swap_remove(usize::from(index) % held.len());
                permit.complete();
                reference.release(actor, place, &quotas.sketch_cells(&actor_name(actor)));
            }
            FairnessOp::SetQuota { limit } => {
                let before = Setting::Quota(reference.limit);
                let got = quotas.set_quota(limit);
                if got.is_ok() {
                    last = Some((before, Setting::Quota(limit)));
                }
                assert_eq!(
                    got.is_ok(),
                    quotas.check_quota(limit).is_ok(),
                    "step {step}"
                );
                assert_eq!(got.is_ok(), reference.set_quota(limit), "step {step}");
                assert_eq!(quotas.quota(), reference.limit, "step {step}");
            }
            FairnessOp::SetOverride { actor, limit } => {
                let name = actor_name(actor);
                let before = Setting::Override(actor, reference.overrides.get(&actor).copied());
                let checked = quotas.check_override(&name, limit);
                let got = quotas.set_override(&name, limit);
                if got.is_ok() {
                    last = Some((before, Setting::Override(actor, limit)));
                }
                assert_eq!(got, checked, "step {step}: check_override disagrees");
                assert_eq!(
                    got.is_ok(),
                    reference.set_override(actor, limit),
                    "step {step}: {got:?}"
                );
                assert_eq!(
                    quotas.limit_of(&name),
                    reference.limit_of(actor),
                    "step {step}"
                );
            }
        }
        assert_eq!(
            quotas.live_actors(),
            reference.entries.len(),
            "step {step}: entries"
        );
        assert!(
            quotas.live_actors() <= actors,
            "step {step}: above capacity"
        );
        assert_eq!(
            quotas.overflow_in_flight(),
            reference.shared,
            "step {step}: shared"
        );
        assert_eq!(
            quotas.total_in_flight(),
            held.len() as u64,
            "step {step}: total"
        );
        // Every actor's ops in flight, wherever held (entry or overflow count), counted right.
        let mut totals: HashMap<u32, u32> = HashMap::new();
        for (actor, place, _) in &held {
            if *place != Place::Unlimited {
                *totals.entry(*actor).or_default() += 1;
            }
        }
        for (&actor, &total) in &totals {
            let mine = reference.entries.get(&actor).map_or(0, |e| e.count)
                + reference.shared_of.get(&actor).copied().unwrap_or(0);
            assert_eq!(mine, total, "step {step}: actor {actor}'s total");
        }
        for (&actor, entry) in &reference.entries {
            assert_eq!(
                quotas.in_flight(&actor_name(actor)),
                entry.count,
                "step {step}: count"
            );
        }
    }
    drop(held);
    assert_eq!(quotas.total_in_flight(), 0);
    for &actor in reference.entries.keys() {
        assert_eq!(
            quotas.in_flight(&actor_name(actor)),
            0,
            "a count outlived its permits"
        );
    }
    quotas.wait_idle();
}

/// One acquire of `actor` on the real quotas and the reference, under the settings in force
/// on both: the same answer, and an admission only within them.
fn acquire<'q>(
    quotas: &'q Quotas,
    reference: &mut RefQuotas,
    held: &mut Vec<(u32, Place, Permit<'q>)>,
    actor: u32,
    step: usize,
) {
    let name = actor_name(actor);
    let cells = quotas.sketch_cells(&name);
    let got = quotas.try_acquire(&name);
    let want = reference.acquire(actor, &cells);
    match (got, want) {
        (Ok(permit), Ok(place)) => {
            assert_eq!(permit.via_overflow(), place == Place::Shared, "step {step}");
            held.push((actor, place, permit));
            // Admitted only within the quotas it decided under (after a lowering,
            // permits held above it stay, but no new one is admitted).
            if place != Place::Unlimited {
                let total = held
                    .iter()
                    .filter(|(a, p, _)| *a == actor && *p != Place::Unlimited)
                    .count();
                let quota = reference.limit_of(actor);
                assert!(
                    total <= quota as usize,
                    "step {step}: actor {actor} admitted to {total} in flight, quota {quota}"
                );
            }
            if place == Place::Shared {
                assert!(
                    reference.shared <= reference.limit,
                    "step {step}: shared above the default quota"
                );
            }
        }
        (Err(e), Err(refusal)) => {
            assert_eq!(
                (e.limit(), e.in_flight(), e.via_overflow()),
                (refusal.limit, refusal.in_flight, refusal.shared),
                "step {step}: refusal"
            );
            // Refused at the quota hit, never below it.
            assert!(e.in_flight() >= e.limit(), "step {step}: refused early");
        }
        (got, want) => panic!("step {step}: acquire of {actor}: got {got:?}, want {want:?}"),
    }
}

/// Decodes fuzzer bytes: a default quota of 1..=5 (or unlimited) and, from the same byte, an
/// optional override for actor 1 (1..=4 or unlimited); 1..=12 actor places; up to 400 ops over
/// actors from a small space (contention) or a large one (churn).
pub fn decode(data: &[u8]) -> (u32, usize, Vec<(u32, u32)>, Vec<FairnessOp>) {
    let mut r = ByteReader::new(data);
    let first = r.u8();
    let limit = match first % 6 {
        5 => UNLIMITED,
        l => u32::from(l) + 1,
    };
    let overrides = match (first / 6) % 6 {
        0 => vec![],
        5 => vec![(1, UNLIMITED)],
        o => vec![(1, u32::from(o))],
    };
    let actors = usize::from(r.u8() % 12) + 1;
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 400 {
        ops.push(match r.u8() % 16 {
            0..=6 => {
                let b = r.u8();
                // One in sixteen (the byte's top bits; the bytes read are as before) read the
                // settings before the latest change.
                if b >= 240 {
                    FairnessOp::StaleAcquire {
                        actor: u32::from(b % 16),
                    }
                } else {
                    FairnessOp::Acquire {
                        actor: u32::from(b % 16),
                    }
                }
            }
            7 | 8 => FairnessOp::Acquire { actor: r.u32() },
            14 => FairnessOp::SetQuota {
                limit: u32::from(r.u8() % 6),
            },
            15 => FairnessOp::SetOverride {
                actor: u32::from(r.u8() % 8),
                limit: match r.u8() % 7 {
                    0 => None,
                    6 => Some(UNLIMITED),
                    l => Some(u32::from(l) - 1),
                },
            },
            _ => FairnessOp::Release { index: r.u16() },
        });
    }
    (limit, actors, overrides, ops)
}

/// The `fairness` fuzz target's body.
pub fn fuzz_fairness(data: &[u8]) {
    let (limit, actors, overrides, ops) = decode(data);
    run(limit, actors, &overrides, &ops);
}
