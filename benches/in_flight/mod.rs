//! The in-flight contenders of the fairness bench (`benches/fairness.rs`, which describes
//! them), behind one trait; the instruction bench (`benches/instructions.rs`) reuses them. A
//! directory module, so that Cargo does not take it for a bench.

use admit::fairness::DEFAULT_QUOTA;
use admit::fairness::{AdaptivePermit, AdaptiveQuotas, AdaptiveTotal, OwnedPermit, Permit, Quotas};
use dashmap::DashMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// The quota every contender enforces.
pub const Q: u32 = DEFAULT_QUOTA;

/// One way to keep per-actor in-flight counts under a quota.
pub trait Contender: Sync {
    const NAME: &'static str;
    /// What an admitted op carries until it is released.
    type Held<'c>: Send
    where
        Self: 'c;
    fn new() -> Self;
    /// Admits one op of `actor` if it has fewer than `Q` in flight.
    fn acquire(&self, actor: &str) -> Option<Self::Held<'_>>;
    /// Frees the place `held` took.
    fn release(&self, actor: &str, held: Self::Held<'_>);
    /// Bytes the contender reports for itself, if it has a fixed footprint.
    fn fixed_bytes(&self) -> Option<usize> {
        None
    }
}

pub struct Admit(Quotas);

impl Contender for Admit {
    const NAME: &'static str = "admit";
    type Held<'c> = Permit<'c>;

    fn new() -> Self {
        Self(Quotas::builder().quota(Q).build().expect("a valid quota"))
    }

    #[inline]
    fn acquire(&self, actor: &str) -> Option<Permit<'_>> {
        self.0.try_acquire(actor.as_bytes()).ok()
    }

    #[inline]
    fn release(&self, _actor: &str, held: Permit<'_>) {
        drop(held);
    }

    fn fixed_bytes(&self) -> Option<usize> {
        Some(self.0.memory_bytes())
    }
}

/// `AdaptiveQuotas::try_acquire` (normal class) under an adaptive total (target 5 ms, L far
/// above what a run holds), reading the default clock (`RecentClock`: one load a reading).
pub struct AdmitAdaptive(AdaptiveQuotas);

impl Contender for AdmitAdaptive {
    const NAME: &'static str = "admit-adaptive";
    type Held<'c> = AdaptivePermit<'c>;

    fn new() -> Self {
        let total = AdaptiveTotal::new(std::time::Duration::from_millis(5))
            .initial(1 << 20)
            .ceiling(1 << 20);
        Self(
            Quotas::builder()
                .quota(Q)
                .build_adaptive(total)
                .expect("a valid quota"),
        )
    }

    #[inline]
    fn acquire(&self, actor: &str) -> Option<AdaptivePermit<'_>> {
        self.0.try_acquire(actor).ok()
    }

    #[inline]
    fn release(&self, _actor: &str, held: AdaptivePermit<'_>) {
        drop(held);
    }

    fn fixed_bytes(&self) -> Option<usize> {
        Some(self.0.quotas().memory_bytes())
    }
}

pub struct AdmitOwned(Quotas);

impl Contender for AdmitOwned {
    const NAME: &'static str = "admit-owned";
    type Held<'c> = OwnedPermit;

    fn new() -> Self {
        Self(Quotas::builder().quota(Q).build().expect("a valid quota"))
    }

    #[inline]
    fn acquire(&self, actor: &str) -> Option<OwnedPermit> {
        self.0.try_acquire_owned(actor.as_bytes()).ok()
    }

    #[inline]
    fn release(&self, _actor: &str, held: OwnedPermit) {
        drop(held);
    }

    fn fixed_bytes(&self) -> Option<usize> {
        Some(self.0.memory_bytes())
    }
}

pub struct MutexMap(Mutex<HashMap<String, u32>>);

impl Contender for MutexMap {
    const NAME: &'static str = "mutex-hashmap";
    type Held<'c> = ();

    fn new() -> Self {
        Self(Mutex::new(HashMap::new()))
    }

    #[inline]
    fn acquire(&self, actor: &str) -> Option<()> {
        let mut counts = self.0.lock().unwrap();
        match counts.get_mut(actor) {
            Some(n) if *n < Q => {
                *n += 1;
                Some(())
            }
            Some(_) => None,
            None => {
                counts.insert(actor.to_owned(), 1);
                Some(())
            }
        }
    }

    #[inline]
    fn release(&self, actor: &str, (): ()) {
        let mut counts = self.0.lock().unwrap();
        if let Some(n) = counts.get_mut(actor) {
            *n -= 1;
            if *n == 0 {
                counts.remove(actor);
            }
        }
    }
}

pub struct Dash(DashMap<String, AtomicU32>);

/// One CAS that refuses at the quota.
#[inline]
pub fn bump(count: &AtomicU32) -> Option<()> {
    count
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < Q).then_some(n + 1)
        })
        .ok()
        .map(drop)
}

impl Contender for Dash {
    const NAME: &'static str = "dashmap";
    type Held<'c> = ();

    fn new() -> Self {
        Self(DashMap::new())
    }

    #[inline]
    fn acquire(&self, actor: &str) -> Option<()> {
        // A hit takes only the shard's read lock; the guard is dropped before `entry` below.
        if let Some(count) = self.0.get(actor) {
            return bump(&count);
        }
        let count = self
            .0
            .entry(actor.to_owned())
            .or_insert_with(|| AtomicU32::new(0));
        bump(&count)
    }

    #[inline]
    fn release(&self, actor: &str, (): ()) {
        let now_zero = self
            .0
            .get(actor)
            .is_some_and(|count| count.fetch_sub(1, Ordering::AcqRel) == 1);
        if now_zero {
            // Under the shard's write lock: an acquire that got in meanwhile keeps it.
            self.0
                .remove_if(actor, |_, count| count.load(Ordering::Acquire) == 0);
        }
    }
}
