//! Refunds: giving back what a grant took, exactly, or not at all.

use super::epoch::{Absolute, Codec};
use super::era;
use super::outcome::Receipt;
use super::{Class, Grant, InvalidCharge, Limiter};
use crate::actor::{Actor, HashedActor, Plain};
use crate::bucket::gcra;
use crate::clock::Clock;
use crate::table::{Key, Verdict};
use std::hash::Hash;

impl<C: Clock> Limiter<C> {
    /// Gives back `n` tokens that `grant` took for `identity`, at the clock's current reading:
    /// for work that was admitted but will not be done (a later check refused it). See
    /// [`Limiter::refund_at`].
    pub fn refund<K: Hash + ?Sized>(
        &self,
        identity: &K,
        grant: &Grant,
        n: u32,
    ) -> Result<(), InvalidCharge> {
        self.refund_at(identity, grant, n, self.clock.now_ns())
    }

    /// Gives back up to `n` of the tokens that `grant` took for `identity`, at reading
    /// `now_ns` (checked against the clock like any reading).
    ///
    /// The bucket the grant was paid from (the identity's entry, or the class's overflow
    /// bucket) is put back exactly as if the take had not happened, **if nothing has changed
    /// it since**: no other take, refund or change of the class landed on it in between. If
    /// something has, the refund is void: the token the grant took may already have come back
    /// into a full bucket and been taken again, and giving it back then would grant it twice
    /// (burst 1 per 10 ms: a take at 0, another at 10 ms, a refund of the first and a third
    /// take at 10 ms would be two grants at one reading). So a refund never gives back more
    /// than the take removed and has not since refilled, whatever races it, **provided each
    /// grant is refunded at most once**: refunded twice, a grant could undo another take that
    /// happened to leave the entry in the same state (a `Grant` is `Copy`, so the limiter
    /// cannot enforce this; the gate refunds each grant once). Never more than the grant took,
    /// and a refund never creates an entry: if the entry was reclaimed meanwhile it was full
    /// again, with nothing to give back.
    ///
    /// ```
    /// use admit::{BucketConfig, Clock, Limiter};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_minute(1)?])?;
    /// let now = limiter.clock().now_ns();
    /// let grant = limiter.try_acquire_at("alice", 0, now)?;
    /// // A later check refused the request: alice keeps her token.
    /// limiter.refund_at("alice", &grant, 1, now)?;
    /// assert!(limiter.try_acquire_at("alice", 0, now).is_ok());
    /// assert!(limiter.try_acquire_at("alice", 0, now).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        grant: &Grant,
        n: u32,
        now_ns: u64,
    ) -> Result<(), InvalidCharge> {
        self.give_back(&Plain(identity), grant, n, now_ns)
    }

    /// [`Limiter::refund_at`] for an actor hashed once ([`HashedActor::new`]).
    pub fn refund_hashed_at(
        &self,
        actor: &HashedActor,
        grant: &Grant,
        n: u32,
        now_ns: u64,
    ) -> Result<(), InvalidCharge> {
        self.give_back(actor, grant, n, now_ns)
    }

    fn give_back<A: Actor>(
        &self,
        actor: &A,
        grant: &Grant,
        n: u32,
        now_ns: u64,
    ) -> Result<(), InvalidCharge> {
        let (index, cls, _, _) = self.class(grant.class, 0)?;
        self.horizon.admit(now_ns, &self.clock)?;
        let receipt = grant.receipt;
        let n = n.min(receipt.n);
        if n == 0 || grant.would_refuse.is_some() {
            // Nothing to give back: a shadow admission took nothing.
            return Ok(());
        }
        let config = cls.config.config_of_stamp(receipt.stamp);
        let credit = u64::from(n) * config.interval_ticks();
        if grant.overflow {
            cls.config
                .refund_overflow(&cls.overflow, receipt.stamp, receipt.left, credit);
            return Ok(());
        }
        let key = self.hasher.key_of(&actor.hashed(), index);
        let now = self.now_tick(now_ns);
        let undone = match &self.epochs {
            None => self.refund_entry(&key, cls, receipt, credit, Absolute),
            Some(epochs) => {
                let codec = epochs.within(self.enter_epoch(epochs, now));
                self.refund_entry(&key, cls, receipt, credit, codec)
            }
        };
        if let Some(Some(full_at)) = undone {
            // The entry is full earlier than when it was charged: a reclaim scan may now free
            // it sooner than the hint says (only a skipped scan otherwise, never a mint).
            self.hint.lower(full_at);
        }
        Ok(())
    }

    /// Undoes the take `receipt` describes on `key`'s entry, if the entry still holds exactly
    /// what that take left, in the era it was taken in: the instant it is full from then
    /// (`None` inside: void, or no such entry).
    fn refund_entry(
        &self,
        key: &Key,
        cls: &Class,
        receipt: Receipt,
        credit: u64,
        codec: impl Codec,
    ) -> Option<Option<u64>> {
        self.table.update_member(key, |value| {
            // A newborn, or a value from another era (a change landed since): void. A value of
            // this era is judged under the class word the take loaded, which must still be
            // the class's (`align` loads it after the value).
            if value & era::CODED == gcra::FRESH {
                return Verdict::Keep(None);
            }
            let aligned = cls.config.align(receipt.stamp, value, |v| codec.decode(v));
            match aligned {
                Some(aligned) if !aligned.converted && aligned.full_at == receipt.left => {
                    // At tick 0 this is `FRESH`, a newborn's code: full at every reading, as the
                    // undone entry is; a sweep keeps it (it cannot tell it from an insert in
                    // flight) until its next charge dates it from the floor.
                    let next = receipt.left.saturating_sub(credit);
                    match codec.encode(next) {
                        Some(word) => Verdict::Commit(word | receipt.stamp.entry_era(), Some(next)),
                        // Below the entered epoch's base: a full entry there; void is as good.
                        None => Verdict::Keep(None),
                    }
                }
                _ => Verdict::Keep(None),
            }
        })
    }
}
