//! The permits: one op's place in its actor's quota, freed exactly once by whoever drops it.
//!
//! Two forms, as `tokio`'s semaphore has: [`Permit`] borrows the [`Quotas`](super::Quotas) it
//! came from, so taking and freeing it touch nothing but the actor's count; [`OwnedPermit`]
//! holds a reference-counted handle to the table, so it can outlive every `Quotas` handle and
//! travel to a `'static` writer thread, at the price of two more atomic operations per op (the
//! count's increment and decrement).

use super::{count_of, QuotasRefused, Shared};
use crate::sync::atomic::Ordering;
use crate::sync::Arc;
use crate::table::{Key, Verdict};

/// Where a permit's count lives.
#[derive(Debug)]
pub(super) enum Held {
    /// In the actor's own entry, at this slot of the table.
    Entry { slot: usize, key: Key },
    /// In the shared overflow count of actors without an entry, and in the sketch by `key`.
    Overflow { key: Key },
    /// Nowhere: the actor's quota is unlimited (only the total counts it, for the drain).
    Unlimited,
    /// Nowhere: enforcement would have refused it, and shadow mode admitted it instead (only
    /// the total counts it, for the drain).
    Shadow(QuotasRefused),
}

/// One admitted op's place in its actor's quota, borrowing the [`Quotas`](super::Quotas) that
/// granted it.
///
/// Send it to the writer with the op (a writer spawned in [`std::thread::scope`], or holding a
/// `&'static Quotas`); the writer drops it (or calls [`Permit::complete`]) once the op is
/// decided, which frees the place exactly once, on whichever thread that happens. A writer that
/// must be `'static` without a static table takes [`OwnedPermit`]s instead
/// ([`Quotas::try_acquire_owned`](super::Quotas::try_acquire_owned)).
///
/// ```
/// use admit::fairness::Quotas;
///
/// let quotas = Quotas::builder().quota(1).build()?;
/// let permit = quotas.try_acquire("agent")?;
/// assert!(!permit.via_overflow(), "counted in the actor's own entry");
/// assert!(quotas.try_acquire("agent").is_err());
/// permit.complete(); // the op is decided
/// assert!(quotas.try_acquire("agent").is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping a Permit frees its actor's place at once; send it to the writer with the op \
              and drop it when the op is decided"]
///
/// ```
/// use admit::fairness::Quotas;
///
/// let quotas = Quotas::builder().quota(1).build()?;
/// let permit = quotas.try_acquire("agent-7")?;
/// assert_eq!(quotas.in_flight("agent-7"), 1);
/// permit.complete(); // the writer decided the op: the place is free
/// assert_eq!(quotas.in_flight("agent-7"), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Permit<'q> {
    pub(super) shared: &'q Shared,
    pub(super) held: Held,
}

impl Permit<'_> {
    /// Marks the op decided and frees its place (the same as dropping the permit).
    #[inline]
    pub fn complete(self) {
        drop(self);
    }

    /// Whether this permit counts against the shared overflow quota (the actor table was full
    /// when it was admitted) rather than the actor's own.
    pub fn via_overflow(&self) -> bool {
        matches!(self.held, Held::Overflow { .. })
    }

    /// The refusal this permit stands for, if the quotas are in [shadow mode](crate::shadow)
    /// and enforcement would have refused: the permit holds no place in the actor's count.
    pub fn would_have_refused(&self) -> Option<&QuotasRefused> {
        match &self.held {
            Held::Shadow(refused) => Some(refused),
            Held::Entry { .. } | Held::Overflow { .. } | Held::Unlimited => None,
        }
    }
}

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.shared.release(&self.held);
    }
}

/// One admitted op's place in its actor's quota, holding its own handle to the table: the
/// `'static` form of [`Permit`], for a writer thread that outlives the submitters' handles.
///
/// ```
/// use admit::fairness::{OwnedPermit, Quotas};
/// use std::sync::mpsc;
///
/// let quotas = Quotas::new();
/// let (tx, rx) = mpsc::channel::<OwnedPermit>();
/// let writer = std::thread::spawn(move || rx.into_iter().for_each(OwnedPermit::complete));
/// tx.send(quotas.try_acquire_owned("agent")?)?;
/// drop(tx);
/// writer.join().unwrap();
/// assert_eq!(quotas.in_flight("agent"), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping an OwnedPermit frees its actor's place at once; send it to the writer with \
              the op and drop it when the op is decided"]
///
/// ```
/// use admit::fairness::Quotas;
///
/// let quotas = Quotas::builder().quota(2).build()?;
/// let permit = quotas.try_acquire_owned("agent-7")?; // 'static: can cross to the writer
/// let writer = std::thread::spawn(move || {
///     // ... apply the op ...
///     drop(permit);
/// });
/// writer.join().unwrap();
/// assert_eq!(quotas.total_in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct OwnedPermit {
    pub(super) shared: Arc<Shared>,
    pub(super) held: Held,
}

impl OwnedPermit {
    /// Marks the op decided and frees its place (the same as dropping the permit).
    #[inline]
    pub fn complete(self) {
        drop(self);
    }

    /// Whether this permit counts against the shared overflow quota (the actor table was full
    /// when it was admitted) rather than the actor's own.
    pub fn via_overflow(&self) -> bool {
        matches!(self.held, Held::Overflow { .. })
    }

    /// The refusal this permit stands for, if the quotas are in [shadow mode](crate::shadow)
    /// and enforcement would have refused: the permit holds no place in the actor's count.
    pub fn would_have_refused(&self) -> Option<&QuotasRefused> {
        match &self.held {
            Held::Shadow(refused) => Some(refused),
            Held::Entry { .. } | Held::Overflow { .. } | Held::Unlimited => None,
        }
    }
}

impl Drop for OwnedPermit {
    #[inline]
    fn drop(&mut self) {
        self.shared.release(&self.held);
    }
}

impl Shared {
    #[inline]
    pub(super) fn release(&self, held: &Held) {
        let reached_zero = match held {
            Held::Entry { slot, key } => {
                let left = self.table.update_slot(*slot, key, |value| {
                    // The count is at least 1 (ours); DIRTY is kept as it is.
                    let left = if count_of(value) == 0 {
                        value
                    } else {
                        value - 1
                    };
                    Verdict::Commit(left, count_of(left))
                });
                // Our count keeps the entry alive (a zero entry is the only kind reclaimed),
                // so it must still be there.
                debug_assert!(left.is_some(), "a permit's entry vanished");
                left == Some(0)
            }
            Held::Overflow { key } => {
                self.sketch.remove(key);
                // Relaxed: a counter; the drain's fence-and-scan reads it.
                self.overflow.fetch_sub(1, Ordering::Relaxed) == 1
            }
            // Relaxed: a counter; the drain's fence-and-scan reads it.
            Held::Unlimited | Held::Shadow(_) => {
                self.unlimited.fetch_sub(1, Ordering::Relaxed) == 1
            }
        };
        if reached_zero {
            self.wake_drain();
        }
    }
}
