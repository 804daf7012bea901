//! One request to admit: its keys, each hashed once, its bytes and its weight.

use super::KeyKind;
use crate::actor::HashedActor;
use crate::fairness::Priority;
use std::hash::Hash;

/// One request to admit: its keys, each hashed once, its bytes and its weight.
///
/// ```
/// use admit::gate::Admission;
///
/// // The simple case: one actor is both the claim and the source (hashed once).
/// let one = Admission::of("alice").bytes(600);
/// assert_eq!(one.bytes_of(), 600);
/// // A claimed key id from a client address: the rate by the address, the rest by the claim.
/// let two = Admission::new("key-7", &"203.0.113.9".parse::<std::net::IpAddr>()?).weight(120);
/// assert_eq!(two.weight_of(), 120);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    claim: HashedActor,
    source: HashedActor,
    prefix: Option<HashedActor>,
    bytes: u64,
    weight: u32,
    priority: Priority,
}

impl Admission {
    /// One actor as both the claim and the source, hashed once: today's one-key admission.
    #[inline]
    pub fn of<K: Hash + ?Sized>(actor: &K) -> Self {
        Self::hashed_one(HashedActor::new(actor))
    }

    /// One actor hashed already, as both the claim and the source.
    #[inline]
    pub fn hashed_one(actor: HashedActor) -> Self {
        Self::hashed(actor, actor)
    }

    /// A claim and a source, each hashed once.
    pub fn new<A: Hash + ?Sized, S: Hash + ?Sized>(claim: &A, source: &S) -> Self {
        Self::hashed(HashedActor::new(claim), HashedActor::new(source))
    }

    /// A claim and a source hashed already.
    #[inline]
    pub fn hashed(claim: HashedActor, source: HashedActor) -> Self {
        Self {
            claim,
            source,
            prefix: None,
            bytes: 0,
            weight: 1,
            priority: Priority::Normal,
        }
    }

    /// The source widened to its network prefix, for limits keyed by
    /// [`KeyKind::SourcePrefix`].
    pub fn source_prefix(mut self, prefix: HashedActor) -> Self {
        self.prefix = Some(prefix);
        self
    }

    /// The bytes the volume quota charges (0 by default: still one event).
    #[inline]
    pub fn bytes(mut self, bytes: u64) -> Self {
        self.bytes = bytes;
        self
    }

    /// The weight a [`Cost::Weight`](super::Cost::Weight) limit charges (1 by default).
    #[inline]
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// The priority class the in-flight quota admits the request in ([`Priority::Normal`] by
    /// default): under [`AdaptiveQuotas`](crate::fairness::AdaptiveQuotas) a class is
    /// admitted only while the ops in flight are below its share of the adaptive limit, so the
    /// sheddable are refused first and the critical last; plain quotas ignore it.
    ///
    /// The priority is the server's word, not the client's: set it from the server's own
    /// code (the route, the caller's role once authenticated) or a trusted proxy that
    /// overwrites what the client sent, never from a header the client controls (see
    /// [`Priority`]).
    ///
    /// ```
    /// use admit::fairness::{AdaptiveTotal, Priority, Quotas};
    /// use admit::gate::{Admission, Gate};
    /// use admit::ManualClock;
    /// use std::time::Duration;
    ///
    /// let total = AdaptiveTotal::new(Duration::from_millis(5)).initial(2);
    /// let quotas = Quotas::builder().build_adaptive_with_clock(total, ManualClock::new())?;
    /// let gate = Gate::<ManualClock>::new().in_flight(quotas);
    /// let batch = gate.try_admit(&Admission::of("batch"))?; // normal: 0 is below 50 % of 2
    /// assert!(gate.try_admit(&Admission::of("batch")).is_err(), "1 is not");
    /// let human = gate.try_admit(&Admission::of("human").priority(Priority::Critical))?;
    /// # drop((batch, human));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The priority class asked for.
    #[inline]
    pub fn priority_of(&self) -> Priority {
        self.priority
    }

    /// The bytes asked for.
    #[inline]
    pub fn bytes_of(&self) -> u64 {
        self.bytes
    }

    /// The weight asked for.
    #[inline]
    pub fn weight_of(&self) -> u32 {
        self.weight
    }

    /// The key of kind `kind`, if the admission has it.
    #[inline]
    pub(crate) fn key(&self, kind: KeyKind) -> Option<&HashedActor> {
        match kind {
            KeyKind::Claim => Some(&self.claim),
            KeyKind::Source => Some(&self.source),
            KeyKind::SourcePrefix => self.prefix.as_ref(),
        }
    }
}
