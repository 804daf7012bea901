//! Refunds: giving back what a grant took, exactly, or not at all.

use super::epoch::{Absolute, Codec};
use super::era;
use super::outcome::Receipt;
use super::{Class, Grant, InvalidCharge, Limiter};
use crate::bucket::{gcra, Refunded};
use crate::clock::Clock;
use crate::table::{Key, Verdict};

impl<C: Clock> Limiter<C> {
    /// Gives back up to `n` of the tokens `grant` took, at the clock's current reading: for
    /// work that was admitted but will not be done (a later check refused it). See
    /// [`Limiter::refund_at`].
    pub fn refund(&self, grant: Grant, n: u32) -> Result<Refunded, InvalidCharge> {
        self.refund_at(grant, n, self.clock.now_ns())
    }

    /// Gives back up to `n` of the tokens `grant` took, at reading `now_ns` (checked against
    /// the clock like any reading): exact or void, never more (the three rules are in
    /// "Refunds" in the [bucket docs](crate::bucket#refunds)).
    ///
    /// The bucket the grant was paid from (the key's entry, or the class's overflow bucket) is
    /// put back exactly as if the take had not happened, **if nothing has changed it since**:
    /// no other take, refund or change of the class landed on it in between
    /// ([`Refunded::Exact`]). If something has, the refund is void ([`Refunded::Void`]): the
    /// token the grant took may already have come back into a full bucket and been taken
    /// again, and giving it back then would grant it twice (burst 1 per 10 ms: a take at 0,
    /// another at 10 ms, a refund of the first and a third take at 10 ms would be two grants at
    /// one reading). The grant is consumed, so it is given back at most once; it names the key
    /// it was charged under, so the refund finds that key's entry and no other; and it names
    /// this limiter, so on another limiter it gives nothing ([`Refunded::OtherInstance`]). A
    /// refund never creates an entry: if the entry was reclaimed meanwhile it was full again,
    /// with nothing to give back.
    ///
    /// Only [`InvalidCharge::ReadingAhead`] is an error; the grant is consumed either way.
    ///
    /// ```
    /// use admit::{BucketConfig, Clock, Limiter, Refunded};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_minute(1)?])?;
    /// let now = limiter.clock().now_ns();
    /// let grant = limiter.try_acquire_at("alice", 0, now)?;
    /// // A later check refused the request: alice keeps her token.
    /// assert_eq!(limiter.refund_at(grant, 1, now)?, Refunded::Exact { tokens: 1 });
    /// assert!(limiter.try_acquire_at("alice", 0, now).is_ok());
    /// assert!(limiter.try_acquire_at("alice", 0, now).is_err());
    ///
    /// // A grant gives back only on the limiter that granted it.
    /// let other = Limiter::builder().build([BucketConfig::per_minute(1)?])?;
    /// let elsewhere = other.try_acquire_at("alice", 0, now)?;
    /// assert_eq!(limiter.refund_at(elsewhere, 1, now)?, Refunded::OtherInstance);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund_at(&self, grant: Grant, n: u32, now_ns: u64) -> Result<Refunded, InvalidCharge> {
        let receipt = grant.receipt;
        let n = n.min(receipt.n);
        if n == 0 || grant.would_refuse.is_some() {
            // Nothing to give back: a shadow admission, or a charge of 0, took nothing.
            return Ok(Refunded::Nothing);
        }
        if grant.limiter != self.id {
            return Ok(Refunded::OtherInstance);
        }
        let (index, cls, _, _) = self.class(grant.class, 0)?;
        self.horizon.admit(now_ns, &self.clock)?;
        let config = cls.config.config_of_stamp(receipt.stamp);
        let credit = u64::from(n) * config.interval_ticks();
        let given = Refunded::Exact { tokens: n };
        if grant.overflow {
            let undone =
                cls.config
                    .refund_overflow(&cls.overflow, receipt.stamp, receipt.left, credit);
            return Ok(if undone { given } else { Refunded::Void });
        }
        let key = self.hasher.key_of_class_hash(grant.key, index);
        let now = self.now_tick(now_ns);
        let undone = match &self.epochs {
            None => self.refund_entry(&key, cls, receipt, credit, Absolute),
            Some(epochs) => {
                let codec = epochs.within(self.enter_epoch(epochs, now));
                self.refund_entry(&key, cls, receipt, credit, codec)
            }
        };
        match undone {
            Some(Some(full_at)) => {
                // The entry is full earlier than when it was charged: a reclaim scan may now
                // free it sooner than the hint says (only a skipped scan otherwise, never a
                // mint).
                for block in self.table.blocks_of(&key) {
                    self.hint.lower(block, full_at);
                }
                Ok(given)
            }
            _ => Ok(Refunded::Void),
        }
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
