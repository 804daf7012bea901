//! The admission's plan, as data: for each limit, which of the request's keys it charges, what
//! it costs, and its name.

use crate::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which of a request's keys a defence charges.
///
/// The **claim** is what the request says it is (a key id, an account, a tenant): any client
/// can name any claim, so a defence keyed by it binds an actor exactly as far as the actor is
/// worth: an honest actor's flood is bounded, but a client that rotates claims spreads across
/// buckets. The **source** is what the client cannot choose (its address as the trusted
/// proxies saw it): a rate keyed by the source bounds a claim-rotating client by what it
/// cannot forge. **The source widened to a prefix** (a /48 for IPv6, a /24 for IPv4) bounds a
/// client that rotates addresses inside its networks.
///
/// Naming a bucket is not a claim about who anyone is: a spoofed claim may choose which bucket
/// pays, never how much is granted.
///
/// ```
/// use admit::gate::KeyKind;
///
/// assert_eq!(KeyKind::Source.to_string(), "the source");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// The key the request claims ([`Admission::new`](super::Admission::new)'s first argument).
    Claim,
    /// The request's source, which the client cannot choose.
    Source,
    /// The source widened to its network prefix ([`Admission::source_prefix`](super::Admission::source_prefix)): an admission
    /// without one is refused by a limit keyed by it, never charged to another key.
    SourcePrefix,
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Claim => "the claim",
            Self::Source => "the source",
            Self::SourcePrefix => "the source's prefix",
        })
    }
}

/// What one admission costs a rate limit.
///
/// ```
/// use admit::gate::Cost;
///
/// assert_eq!(Cost::Tokens(3).of(40), 3);
/// // LLM tokens a minute: the request's weight, but never less than 1.
/// assert_eq!(Cost::Weight { min: 1 }.of(40), 40);
/// assert_eq!(Cost::Weight { min: 1 }.of(0), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// This many tokens, whatever the request. 0 is no free pass: refused exactly when one
    /// token would be, and takes nothing.
    Tokens(u32),
    /// The admission's weight ([`Admission::weight`](super::Admission::weight)), and at least `min`: a weight taken from
    /// the request is a client's claim, and `min` is what the server charges whatever it says.
    Weight {
        /// The least this limit charges.
        min: u32,
    },
}

impl Cost {
    /// The tokens this cost takes from an admission of `weight`.
    #[inline]
    pub fn of(&self, weight: u32) -> u32 {
        match *self {
            Self::Tokens(n) => n,
            Self::Weight { min } => weight.max(min),
        }
    }
}

/// One rate limit of an admission: a class of a [`Limiter`](crate::Limiter), the key it
/// charges, its cost and its name (which a refusal carries).
///
/// ```
/// use admit::gate::{Cost, KeyKind, Limit};
///
/// let per_source = Limit::new("per source", 0); // the source, one token
/// assert_eq!(per_source.key_kind(), KeyKind::Source);
/// let tokens = Limit::new("tokens per minute", 1)
///     .keyed_by(KeyKind::Claim)
///     .cost(Cost::Weight { min: 1 });
/// assert_eq!(tokens.name(), "tokens per minute");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub(super) name: Arc<str>,
    pub(super) class: usize,
    pub(super) key: KeyKind,
    pub(super) cost: LiveCost,
    pub(super) by_outcome: bool,
}

impl Limit {
    /// Class `class` of its limiter, keyed by the source, one token an admission.
    pub fn new(name: impl Into<Arc<str>>, class: usize) -> Self {
        Self {
            name: name.into(),
            class,
            key: KeyKind::Source,
            cost: LiveCost::new(Cost::Tokens(1)),
            by_outcome: false,
        }
    }

    /// Charges `key` instead of the source.
    pub fn keyed_by(mut self, key: KeyKind) -> Self {
        self.key = key;
        self
    }

    /// Costs `cost` an admission instead of one token.
    pub fn cost(mut self, cost: Cost) -> Self {
        self.cost = LiveCost::new(cost);
        self
    }

    /// Charges it by outcome: an admission only checks it (refused exactly when the charge
    /// would be, taking nothing), and [`Gate::charge_outcome_at`](super::Gate::charge_outcome_at)
    /// charges it after the work, for the outcomes the caller counts (a failed login):
    /// successes cost nothing, and a failure is never forgiven (its charge is a
    /// [debit](crate::Limiter::debit_at): it takes the tokens whatever the bucket holds, down
    /// to an empty bucket).
    ///
    /// ```
    /// use admit::gate::{Admission, Gate, Limit};
    /// use admit::{BucketConfig, Limiter};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_minute(3)?])?;
    /// let gate = Gate::new().rates(limiter, [Limit::new("failed logins", 0).by_outcome()])?;
    /// let alice = Admission::of("alice");
    /// for _ in 0..3 {
    ///     let pass = gate.try_admit(&alice)?; // a successful login: nothing charged
    ///     drop(pass);
    /// }
    /// for _ in 0..3 {
    ///     let pass = gate.try_admit(&alice)?;
    ///     gate.charge_outcome(&alice)?; // a failed one
    ///     drop(pass);
    /// }
    /// assert!(gate.try_admit(&alice).is_err(), "three failures a minute");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn by_outcome(mut self) -> Self {
        self.by_outcome = true;
        self
    }

    /// Whether it is charged by outcome ([`Limit::by_outcome`]).
    pub fn is_by_outcome(&self) -> bool {
        self.by_outcome
    }

    /// The limit's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The limiter class it charges.
    pub fn class(&self) -> usize {
        self.class
    }

    /// The key it charges.
    pub fn key_kind(&self) -> KeyKind {
        self.key
    }

    /// What an admission costs it. A limit a [`LiveLimits`](crate::live::LiveLimits) built
    /// reads the cost its last reload set.
    pub fn cost_of(&self) -> Cost {
        self.cost.get()
    }

    /// Sets the cost every later admission pays (a reload; the gate was built with a cost its
    /// class's burst holds, and the reload checks the new one against the new burst).
    #[cfg(feature = "config")]
    pub(crate) fn set_cost(&self, cost: Cost) {
        self.cost.set(cost);
    }
}

/// A [`Cost`] that a reload may change while admissions read it: the kind in bit 32, the
/// count in the low 32 bits, one word.
pub(super) struct LiveCost(AtomicU64);

/// Bit 32 of a [`LiveCost`]: the request's weight, at least the count.
const WEIGHT: u64 = 1 << 32;

impl LiveCost {
    fn new(cost: Cost) -> Self {
        Self(AtomicU64::new(Self::encode(cost)))
    }

    fn encode(cost: Cost) -> u64 {
        match cost {
            Cost::Tokens(n) => u64::from(n),
            Cost::Weight { min } => WEIGHT | u64::from(min),
        }
    }

    /// The tokens an admission of `weight` pays.
    #[inline(always)]
    pub(super) fn of(&self, weight: u32) -> u32 {
        // Relaxed: the cost is one word, read alone; an admission needs some cost a reload
        // set, not one ordered with any other change (a reload's changes are made one by one,
        // and an admission meanwhile may see some and not others).
        let word = self.0.load(Ordering::Relaxed);
        // Truncation keeps the count, the low 32 bits.
        let count = word as u32;
        if word & WEIGHT == 0 {
            count
        } else {
            weight.max(count)
        }
    }

    fn get(&self) -> Cost {
        // Relaxed: as in `of`.
        let word = self.0.load(Ordering::Relaxed);
        let count = word as u32;
        if word & WEIGHT == 0 {
            Cost::Tokens(count)
        } else {
            Cost::Weight { min: count }
        }
    }

    #[cfg(feature = "config")]
    fn set(&self, cost: Cost) {
        // Relaxed: see `of`; the reload's lock orders reloads among themselves.
        self.0.store(Self::encode(cost), Ordering::Relaxed);
    }
}

impl Clone for LiveCost {
    /// A cell of its own, holding the cost this one holds now.
    fn clone(&self) -> Self {
        Self::new(self.get())
    }
}

impl PartialEq for LiveCost {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for LiveCost {}

impl std::fmt::Debug for LiveCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}
