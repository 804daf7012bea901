//! The permit: one op's place in its actor's quota, freed exactly once by whoever drops it.

use super::Shared;
use crate::sync::Arc;
use crate::table::Key;

/// Where a permit's count lives.
#[derive(Debug)]
pub(super) enum Held {
    /// In the actor's own entry, at this slot of the table.
    Entry { slot: usize, key: Key },
    /// In the shared overflow count of actors without an entry.
    Overflow,
    /// Nowhere: the actor's quota is unlimited (only the total counts it, for the drain).
    Unlimited,
}

/// One admitted op's place in its actor's quota.
///
/// Send it to the writer with the op; the writer drops it (or calls [`Permit::complete`]) once
/// the op is decided, which frees the place exactly once, on whichever thread that happens.
#[must_use = "dropping a Permit frees its actor's place at once; send it to the writer with the op \
              and drop it when the op is decided"]
#[derive(Debug)]
pub struct Permit {
    pub(super) shared: Arc<Shared>,
    pub(super) held: Held,
}

impl Permit {
    /// Marks the op decided and frees its place (the same as dropping the permit).
    #[inline]
    pub fn complete(self) {
        drop(self);
    }

    /// Whether this permit counts against the shared overflow quota (the actor table was full
    /// when it was admitted) rather than the actor's own.
    pub fn is_shared(&self) -> bool {
        matches!(self.held, Held::Overflow)
    }
}

impl Drop for Permit {
    #[inline]
    fn drop(&mut self) {
        self.shared.release(&self.held);
    }
}
