//! What an admission's charges left, recorded as they are made: the numbers the IETF
//! `RateLimit` fields state, read off each defence's own decision (the in-flight CAS, each
//! limit's grant, the volume's commit), never by a second look at any table.
//!
//! An admission records through its [`Charged`](super::pass::Charged)'s recorder: the plain
//! admission's is [`NoRecord`], whose every method is empty and inlined away (the charges
//! compile as they did); the tower layer's, with the fields on, is a [`Take`].

#[cfg(feature = "tower")]
use super::MAX_LIMITS;
use crate::actor::HashedActor;
use crate::clock::Clock;
#[cfg(feature = "tower")]
use crate::fairness::Places;
#[cfg(feature = "tower")]
use crate::limiter::Left;
use crate::limiter::{Grant, Limiter};
use crate::quota::{RateLimit, RateLimitRefused};

#[cfg(feature = "tower")]
use crate::quota::VolumeLeft;

/// Records what each charge of an admission left.
pub(crate) trait Record {
    /// A limit was taken (or checked): what its grant says its bucket holds.
    #[inline(always)]
    fn limit<C: Clock>(&mut self, _limiter: &Limiter<C>, _grant: &Grant, _now_ns: u64) {}

    /// Charges the volume quota for `actor`.
    #[inline(always)]
    fn volume<C: Clock>(
        &mut self,
        quota: &RateLimit<C>,
        actor: &HashedActor,
        bytes: u64,
        now_ns: u64,
    ) -> Result<(), RateLimitRefused> {
        quota.try_acquire_hashed_at(actor, bytes, now_ns)
    }
}

/// Records nothing: the plain admission.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NoRecord;

impl Record for NoRecord {}

/// One limit's bucket as its take left it, and as its refund puts it back (what the bucket
/// holds if a later defence refused the admission).
#[cfg(feature = "tower")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) after: Left,
    pub(crate) undone: Left,
}

/// What an admission's charges left, defence by defence (see the [module docs](self)).
#[cfg(feature = "tower")]
#[derive(Debug, Clone)]
pub(crate) struct Take {
    /// The actor's in-flight places as its acquire counted them (`None`: no in-flight quota
    /// in the gate, an unlimited actor, or the admission never reached it).
    pub(crate) places: Option<Places>,
    /// The limits taken, in the gate's order: the first `len`.
    limits: [Option<Taken>; MAX_LIMITS],
    len: usize,
    /// What the volume quota left, if it counted this admission.
    pub(crate) volume: Option<VolumeLeft>,
}

#[cfg(feature = "tower")]
impl Default for Take {
    fn default() -> Self {
        Self {
            places: None,
            limits: [None; MAX_LIMITS],
            len: 0,
            volume: None,
        }
    }
}

#[cfg(feature = "tower")]
impl Take {
    /// The limits taken, in the order the gate charges them: on a refusal by a limit, that
    /// limit's index is this slice's length (it was never taken, and the ones before were).
    /// `None` where a limit's grant could not be read (another limiter's: never).
    pub(crate) fn limits(&self) -> &[Option<Taken>] {
        self.limits.get(..self.len).unwrap_or(&[])
    }
}

#[cfg(feature = "tower")]
impl Record for &mut Take {
    #[inline]
    fn limit<C: Clock>(&mut self, limiter: &Limiter<C>, grant: &Grant, now_ns: u64) {
        let taken = limiter
            .left_of(grant, false, now_ns)
            .zip(limiter.left_of(grant, true, now_ns))
            .map(|(after, undone)| Taken { after, undone });
        if let Some(slot) = self.limits.get_mut(self.len) {
            *slot = taken;
            self.len += 1;
        }
    }

    #[inline]
    fn volume<C: Clock>(
        &mut self,
        quota: &RateLimit<C>,
        actor: &HashedActor,
        bytes: u64,
        now_ns: u64,
    ) -> Result<(), RateLimitRefused> {
        self.volume = Some(quota.try_acquire_hashed_left_at(actor, bytes, now_ns)?);
        Ok(())
    }
}
