//! Limits charged by outcome ([`Limit::by_outcome`]): checked at admission, charged after the
//! work for the outcomes the caller counts.
//!
//! An admission **checks** such a limit ([`Limiter::check_hashed_at`]): refused exactly when
//! the charge would be, it takes nothing, so there is nothing to give back if a later defence
//! refuses. After the work, [`Gate::charge_outcome_at`] **debits** it
//! ([`Limiter::debit_hashed_at`]) for the outcomes that count, say a failed login: the debit
//! takes the tokens whatever the bucket holds, so a failure is never forgiven, and a success
//! (never charged) costs nothing.
//!
//! What it cannot bound exactly: requests that passed their check together all run, so up to
//! the number of requests in flight on one key fail before the first debit is seen; their
//! debits are all taken, down to an empty bucket (a debit past empty is cut, see
//! [`Limiter::debit_at`]), so the failures a key gets through over a span stay within the
//! limit's burst plus what refills, plus the requests it had in flight when the bucket ran
//! out. An in-flight quota on the same key bounds that last term.

use super::{Admission, Gate, GateRefused, Limit};
use crate::clock::Clock;
use crate::limiter::{Grant, Limiter};
use std::sync::Arc;

/// Takes `limit`'s cost for `admission` at `now_ns`, or, for a limit charged by outcome,
/// checks it (no grant): the one step of the gate's recursion that touches a limiter. The
/// cost is returned for the refund.
#[inline(always)]
pub(super) fn take<C: Clock>(
    limiter: &Limiter<C>,
    limit: &Limit,
    admission: &Admission,
    now_ns: u64,
) -> Result<(Grant, u32), GateRefused> {
    let actor = admission.key(limit.key).ok_or(GateRefused::MissingKey {
        defence: "rate limit",
        key: limit.key,
    })?;
    let n = limit.cost.of(admission.weight_of());
    let grant = if limit.by_outcome {
        limiter.check_for_grant_at(actor, limit.class, n, now_ns)
    } else {
        limiter.try_acquire_hashed_at_compact(actor, limit.class, n, now_ns)
    };
    let grant = grant.map_err(|refused| GateRefused::Rate {
        limit: Arc::clone(&limit.name),
        key: limit.key,
        refused,
    })?;
    Ok((grant, n))
}

impl<C: Clock, I: super::InFlight> Gate<C, I> {
    /// [`Gate::charge_outcome_at`] at a reading of the gate's clock.
    pub fn charge_outcome(&self, admission: &Admission) -> Result<(), GateRefused> {
        self.charge_outcome_at(admission, self.now_ns())
    }

    /// Charges every limit charged by outcome ([`Limit::by_outcome`]) its cost for
    /// `admission`'s keys at reading `now_ns`: call it once the work the admission let in has
    /// an outcome that counts (a failed login). A debit, never refused: the tokens are taken
    /// whatever the bucket holds, down to an empty bucket. Every such limit is charged even if
    /// one fails; the first failure is returned: an admission without the key a limit charges
    /// ([`GateRefused::MissingKey`]), or a reading the limiter cannot take
    /// ([`GateRefused::Rate`] with an invalid charge, as for any decision: a reading ahead of
    /// its clock, or one made while a change lands, which is worth asking again).
    ///
    /// Nothing ties the call to an admission: charge only outcomes of admissions the gate let
    /// in, once each.
    pub fn charge_outcome_at(&self, admission: &Admission, now_ns: u64) -> Result<(), GateRefused> {
        let mut first = Ok(());
        for (limiter, limit) in self.limits().filter(|(_, limit)| limit.by_outcome) {
            let charged = match admission.key(limit.key) {
                None => Err(GateRefused::MissingKey {
                    defence: "rate limit",
                    key: limit.key,
                }),
                Some(actor) => {
                    let n = limit.cost.of(admission.weight_of());
                    limiter
                        .debit_hashed_at(actor, limit.class, n, now_ns)
                        .map(|_| ())
                        .map_err(|invalid| GateRefused::Rate {
                            limit: Arc::clone(&limit.name),
                            key: limit.key,
                            refused: invalid.into(),
                        })
                }
            };
            if first.is_ok() {
                first = charged;
            }
        }
        first
    }

    /// Whether any limit is charged by outcome ([`Limit::by_outcome`]).
    pub fn charges_by_outcome(&self) -> bool {
        self.limits().any(|(_, limit)| limit.by_outcome)
    }
}
