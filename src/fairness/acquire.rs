//! Acquiring a place: the `try_acquire*` entry points and the decision on the actor's entry.

use super::count::Count;
#[cfg(feature = "tower")]
use super::count::Places;
use super::permit::Held;
use super::{count_of, OwnedPermit, Permit, Quotas, QuotasRefused, Shared, DIRTY, UNLIMITED};
use crate::actor::{Actor, HashedActor, Plain};
use crate::sync::atomic::{fence, Ordering};
use crate::table::{Key, Update, Verdict};
use std::hash::Hash;

impl Quotas {
    /// Admits one op of `actor` if it has fewer than its quota awaiting a decision.
    ///
    /// Lock-free and never blocking: over the quota it answers at once.
    ///
    /// The permit borrows this handle; see [`Quotas::try_acquire_owned`] for one that does not.
    #[inline]
    pub fn try_acquire<K: Hash + ?Sized>(&self, actor: &K) -> Result<Permit<'_>, QuotasRefused> {
        let (held, ()) = self.shared.place(&Plain(actor))?;
        Ok(Permit {
            shared: &self.shared,
            held,
        })
    }

    /// [`Quotas::try_acquire`], with a permit that holds its own handle to the table, for a
    /// writer thread that must be `'static`. It costs two more atomic operations per op (the
    /// handle's reference count going up here and down when the permit is dropped).
    ///
    /// ```
    /// use admit::fairness::Quotas;
    ///
    /// let quotas = Quotas::new();
    /// let permit = quotas.try_acquire_owned(&String::from("agent-1"))?;
    /// let writer = std::thread::spawn(move || drop(permit)); // 'static: no borrow of `quotas`
    /// writer.join().unwrap();
    /// assert_eq!(quotas.total_in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// ```
    #[inline]
    pub fn try_acquire_owned<K: Hash + ?Sized>(
        &self,
        actor: &K,
    ) -> Result<OwnedPermit, QuotasRefused> {
        let (held, ()) = self.shared.place(&Plain(actor))?;
        Ok(OwnedPermit {
            shared: self.shared.clone(),
            held,
        })
    }

    /// [`Quotas::try_acquire`] for an actor hashed once ([`HashedActor::new`]): the same entry
    /// the identity names, without hashing it again. A server hashes each request's actor once
    /// and hands it to every defence.
    ///
    /// ```
    /// use admit::fairness::Quotas;
    /// use admit::HashedActor;
    ///
    /// let quotas = Quotas::builder().quota(1).build()?;
    /// let actor = HashedActor::new("agent-1");
    /// let permit = quotas.try_acquire_hashed(&actor)?;
    /// assert!(quotas.try_acquire("agent-1").is_err(), "one place, taken");
    /// drop(permit);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_hashed(&self, actor: &HashedActor) -> Result<Permit<'_>, QuotasRefused> {
        let (held, ()) = self.shared.place(actor)?;
        Ok(Permit {
            shared: &self.shared,
            held,
        })
    }

    /// [`Quotas::try_acquire_owned`] for an actor hashed once.
    #[inline]
    pub fn try_acquire_owned_hashed(
        &self,
        actor: &HashedActor,
    ) -> Result<OwnedPermit, QuotasRefused> {
        let (held, ()) = self.shared.place(actor)?;
        Ok(OwnedPermit {
            shared: self.shared.clone(),
            held,
        })
    }
}

#[cfg(feature = "tower")]
impl Quotas {
    /// [`Quotas::try_acquire_hashed`], with the actor's places as this acquire counted them
    /// (`None` for an unlimited actor), for the IETF `RateLimit` fields: read off the
    /// acquire's own CAS, not by a second look at the table.
    #[inline]
    pub(crate) fn try_acquire_counted_hashed(
        &self,
        actor: &HashedActor,
    ) -> Result<(Permit<'_>, Option<Places>), QuotasRefused> {
        let (held, places) = self.shared.place(actor)?;
        let permit = Permit {
            shared: &self.shared,
            held,
        };
        Ok((permit, places))
    }

    /// [`Quotas::try_acquire_owned_hashed`], with the places as
    /// [`Quotas::try_acquire_counted_hashed`] counts them.
    #[inline]
    pub(crate) fn try_acquire_owned_counted_hashed(
        &self,
        actor: &HashedActor,
    ) -> Result<(OwnedPermit, Option<Places>), QuotasRefused> {
        let (held, places) = self.shared.place(actor)?;
        let permit = OwnedPermit {
            shared: self.shared.clone(),
            held,
        };
        Ok((permit, places))
    }
}

/// What the CAS on the actor's entry took: a place in a clean entry, with what the acquire
/// counts (`N`), or a reservation in a dirty one, at this count, for `validate`.
enum Taken<N> {
    Clean(N),
    Reserved(u64),
}

impl Shared {
    /// Places one op of `actor`, then counts the decision and traces a refusal, as attached
    /// and compiled; with the place, what the acquire counts (`N`, see [`Count`]).
    // Always: the acquire's whole hit path, which a build with metrics compiled in would
    // otherwise leave out of line (+11 instructions per acquire, callgrind).
    #[inline(always)]
    fn place<A: Actor, N: Count>(&self, actor: &A) -> Result<(Held, N), QuotasRefused> {
        self.place_counting::<A, N, true>(actor)
    }

    /// [`Shared::place`], counting an admission only if `ADMITTED`: adaptive quotas count
    /// theirs once their total has admitted too ([`Shared::record_admitted`]).
    #[inline(always)]
    pub(super) fn place_counting<A: Actor, N: Count, const ADMITTED: bool>(
        &self,
        actor: &A,
    ) -> Result<(Held, N), QuotasRefused> {
        // Counted and traced inside the arms, so that the answer goes straight to the caller:
        // one branch when no metrics are attached (see `crate::metrics`, "What a decision
        // costs"), nothing on an admission for tracing.
        match self.take_place(actor) {
            Ok((held, counted)) => {
                if ADMITTED {
                    self.record_admitted(&held);
                }
                Ok((held, counted))
            }
            Err((refused, key)) => self.refused_counting(&key, refused),
        }
    }

    /// A refusal (`key` the actor's): counted and traced; in shadow mode admitted instead,
    /// holding no place.
    #[inline(always)]
    pub(super) fn refused(&self, key: &Key, refused: QuotasRefused) -> Result<Held, QuotasRefused> {
        self.refused_counting::<()>(key, refused)
            .map(|(held, ())| held)
    }

    /// [`Shared::refused`], with what the acquire counts: a shadow admission is counted as a
    /// full quota (enforcement would have refused).
    #[inline(always)]
    fn refused_counting<N: Count>(
        &self,
        key: &Key,
        refused: QuotasRefused,
    ) -> Result<(Held, N), QuotasRefused> {
        let shadow = self.shadow.admits_instead();
        self.observe_refusal(key, &refused, shadow);
        if shadow {
            // Relaxed: a counter; the drain's fence-and-scan reads it (as for an unlimited
            // actor's op, which also holds no place).
            self.unlimited.fetch_add(1, Ordering::Relaxed);
            let full = N::of(u64::from(refused.limit), refused.limit);
            return Ok((Held::Shadow(refused), full));
        }
        Err(refused)
    }

    /// Counts an admission, as attached and compiled.
    #[inline(always)]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(super) fn record_admitted(&self, held: &Held) {
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.metrics.as_deref() {
            metrics.record(true, matches!(held, Held::Overflow { .. }));
        }
    }

    /// Counts and traces a refusal, as attached and compiled.
    #[inline]
    // Each feature reads some of the arguments; with both off, none.
    #[cfg_attr(
        not(all(feature = "metrics", feature = "tracing")),
        allow(unused_variables)
    )]
    pub(super) fn observe_refusal(&self, key: &Key, refused: &QuotasRefused, shadow: bool) {
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.metrics.as_deref() {
            if shadow {
                metrics.record_would_refuse();
            } else {
                metrics.record(false, false);
            }
        }
        #[cfg(feature = "tracing")]
        crate::trace::in_flight_refused(|| self.digest.of_key(key), refused, shadow);
    }

    #[inline]
    /// The decision proper; a refusal comes with the actor's key, for the refusal event.
    fn take_place<A: Actor, N: Count>(&self, actor: &A) -> Result<(Held, N), (QuotasRefused, Key)> {
        // The actor is hashed once: the same hash finds its override and its entry. Without
        // overrides, an unlimited default admits before hashing at all, as before. The default
        // quota is read once: the overflow cap below is the same reading.
        let default = self.default_limit();
        let (limit, hash) = if !self.overrides.any() {
            (default, None)
        } else {
            let hash = self.hasher.hash_of(&actor.hashed(), 0);
            (self.overrides.get(hash).unwrap_or(default), Some(hash))
        };
        if limit == UNLIMITED {
            // Relaxed: a counter; the drain's fence-and-scan reads it (see "Orderings").
            self.unlimited.fetch_add(1, Ordering::Relaxed);
            return Ok((Held::Unlimited, N::unlimited()));
        }
        let key = self
            .hasher
            .key_of_hash(hash.unwrap_or_else(|| self.hasher.hash_of(&actor.hashed(), 0)));
        let mut reclaimed = false;
        loop {
            // A new entry is born DIRTY: its actor may hold overflow places.
            let update = self.table.update_or_reclaim(
                &key,
                DIRTY,
                |value| {
                    if value < u64::from(limit) {
                        // The hit: a clean entry (value == count) under the quota.
                        Verdict::Commit(value + 1, Ok(Taken::Clean(N::of(value + 1, limit))))
                    } else if value & DIRTY != 0 && count_of(value) < u64::from(limit) {
                        // Reserve a place; `validate` checks it against the overflow places.
                        Verdict::Commit(value + 1, Ok(Taken::Reserved(count_of(value) + 1)))
                    } else {
                        Verdict::Keep(Err(count_of(value)))
                    }
                },
                // At the cap, once per acquire: reclaim idle entries if a scan is due.
                || !std::mem::replace(&mut reclaimed, true) && self.reclaim_idle_entries(),
            );
            let shared = match update {
                Update::Landed {
                    slot,
                    result: Ok(reserved),
                    inserted,
                } => {
                    if inserted {
                        self.count_absent();
                    }
                    return match reserved {
                        Taken::Clean(counted) => Ok((Held::Entry { slot, key }, counted)),
                        Taken::Reserved(count) => self
                            .validate(limit, slot, key, count)
                            .map_err(|refused| (refused, key)),
                    };
                }
                Update::Landed {
                    result: Err(count), ..
                } => {
                    let refused = QuotasRefused {
                        limit,
                        in_flight: u32::try_from(count).unwrap_or(u32::MAX),
                        shared: false,
                        class: 0,
                    };
                    return Err((refused, key));
                }
                Update::AtCap | Update::WindowFull => self.place_shared(default, limit, key),
            };
            if let Some(answer) = shared {
                return answer.map_err(|refused| (refused, key));
            }
            // The actor's entry appeared meanwhile: count the op there instead.
        }
    }

    /// An acquire reserved a place in a DIRTY entry (its count now `count`): admit it only if
    /// the count plus the actor's overflow places stays within `limit`. If the actor holds no
    /// overflow place, the entry is made clean, and its next acquires are single CASes again.
    /// What the acquire counts (`N`): the count plus the overflow places.
    #[cold]
    fn validate<N: Count>(
        &self,
        limit: u32,
        slot: usize,
        key: Key,
        count: u64,
    ) -> Result<(Held, N), QuotasRefused> {
        // SeqCst fence between our reservation (the entry CAS) and our read of the sketch,
        // pairing with `place_shared`'s between its sketch write and its entry lookup: one of
        // the two sees the other (see "Orderings").
        fence(Ordering::SeqCst);
        let held = Held::Entry { slot, key };
        let shared = self.sketch.estimate(&key);
        let counted = N::of(count.saturating_add(u64::from(shared)), limit);
        if shared == 0 {
            // Our place keeps the entry alive (count >= 1), so it is still ours to update.
            self.table.update_slot(slot, &key, |value| {
                if value & DIRTY == 0 {
                    Verdict::Keep(())
                } else {
                    Verdict::Commit(value & !DIRTY, ())
                }
            });
            return Ok((held, counted));
        }
        if count.saturating_add(u64::from(shared)) <= u64::from(limit) {
            return Ok((held, counted));
        }
        self.release(&held);
        Err(QuotasRefused {
            limit,
            in_flight: u32::try_from(count.saturating_sub(1) + u64::from(shared))
                .unwrap_or(u32::MAX),
            shared: false,
            class: 0,
        })
    }
}
