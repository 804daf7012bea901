//! The two check points, and what each tells the verb layer.

use super::outcome::{RegistrarError, RetryAfter};
use super::sink::{LimitedEvent, LimitedSink};
use super::verb;
use super::{Bucket, CountingSink, RegistrarConfig, Verb};
use crate::clock::{Clock, RecentClock};
use crate::limiter::{Limiter, LimiterRefused};
use std::fmt;
use std::marker::PhantomData;

/// The registrar profile: a keyed [`Limiter`] with two classes per verb, one limited-invocation
/// sink, and the two check points a verb layer calls at its two arms. See the
/// [module documentation](super) for where each check point sits and why.
///
/// Every call takes its decision and releases it before returning: nothing is held across the
/// verb layer's intent write, its backend call or its outcome write.
///
/// ```
/// use admit::registrar::{Bucket, CountingSink, Records, RegistrarConfig, RegistrarLimiter, Verb};
///
/// #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// enum Op { Mint }
///
/// impl Verb for Op {
///     const ALL: &'static [Self] = &[Op::Mint];
///     fn index(self) -> usize { 0 }
///     fn name(self) -> &'static str { "mint" }
/// }
///
/// let registrar = RegistrarLimiter::<Op>::builder(RegistrarConfig::default()).build(CountingSink::new())?;
/// // Check point 1: a refusal arm; with a token, write its intent and outcome records.
/// assert_eq!(registrar.enter_predecision(b"host-1", Op::Mint), Records::Write);
/// // Check point 2: an admitted invocation, before its intent write.
/// match registrar.enter_admission(b"host-1", Op::Mint) {
///     Ok(_admitted) => { /* write intent, call the backend, write the outcome */ }
///     Err(throttled) => println!("busy, retry after {} s", throttled.retry_after().secs()),
/// }
/// assert_eq!(registrar.sink().count(Bucket::Admission), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RegistrarLimiter<V: Verb, S: LimitedSink<V> = CountingSink, C: Clock = RecentClock> {
    pub(super) limiter: Limiter<C>,
    pub(super) sink: S,
    pub(super) config: RegistrarConfig,
    pub(super) verbs: PhantomData<fn(V)>,
}

/// What check point 1 tells the pre-derivation arm about its two record writes.
///
/// Either way the arm then runs its checks and returns its real, permanent refusal: check
/// point 1 never throttles.
///
/// ```
/// # use admit::registrar::Verb;
/// # #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// # enum Op { Mint }
/// # impl Verb for Op {
/// #     const ALL: &'static [Self] = &[Op::Mint];
/// #     fn index(self) -> usize { 0 }
/// #     fn name(self) -> &'static str { "mint" }
/// # }
/// use admit::registrar::{CountingSink, Records, RegistrarConfig, RegistrarLimiter};
///
/// let registrar = RegistrarLimiter::<Op>::builder(RegistrarConfig::default()).build(CountingSink::new())?;
/// let records = registrar.enter_predecision(b"host-1", Op::Mint);
/// if records.should_write() {
///     // write the intent record, run the checks, write the outcome record
/// }
/// assert_eq!(records, Records::Write);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "the arm must write its intent and outcome records only when told `Records::Write`"]
pub enum Records {
    /// A token was available: write the intent, run the checks, write the outcome.
    Write,
    /// The bucket was empty: skip both record writes (one limited-invocation event has been
    /// emitted), still run the checks, still return the real refusal.
    Skip,
}

impl Records {
    /// Whether the arm writes its intent and outcome records.
    pub fn should_write(self) -> bool {
        matches!(self, Self::Write)
    }
}

/// Check point 2's pass: the invocation was charged an admission token and may now write its
/// intent and go on to the backend.
///
/// Only [`RegistrarLimiter::enter_admission`] makes one, so a verb layer whose intent write
/// takes an `&Admitted` cannot write an intent on the post-derivation arm before the check.
/// Dropping it gives nothing back: the token is spent.
///
/// ```
/// # use admit::registrar::Verb;
/// # #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// # enum Op { Mint }
/// # impl Verb for Op {
/// #     const ALL: &'static [Self] = &[Op::Mint];
/// #     fn index(self) -> usize { 0 }
/// #     fn name(self) -> &'static str { "mint" }
/// # }
/// use admit::registrar::{CountingSink, RegistrarConfig, RegistrarLimiter};
///
/// let registrar = RegistrarLimiter::<Op>::builder(RegistrarConfig::default()).build(CountingSink::new())?;
/// let admitted = registrar.enter_admission(b"host-1", Op::Mint)?;
/// assert!(!admitted.via_overflow(), "host-1 has buckets of its own");
/// // now: write the intent, call the backend, write the outcome
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an admitted invocation goes on to write its intent and do its backend work"]
pub struct Admitted {
    via_overflow: bool,
}

impl Admitted {
    /// Whether a shared overflow bucket paid because the entry table was saturated (see
    /// [`crate::limiter`]).
    pub fn via_overflow(&self) -> bool {
        self.via_overflow
    }
}

/// Check point 2's refusal: the admission bucket had no token. The invocation must not be
/// attempted: no intent, no backend work, no outcome. One limited-invocation event has been
/// emitted. Converts into [`RegistrarError::RegistrarBusy`], so `?` in a verb returning
/// `RegistrarError` hands the caller the typed throttle.
///
/// ```
/// # use admit::registrar::Verb;
/// # #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// # enum Op { Mint }
/// # impl Verb for Op {
/// #     const ALL: &'static [Self] = &[Op::Mint];
/// #     fn index(self) -> usize { 0 }
/// #     fn name(self) -> &'static str { "mint" }
/// # }
/// use admit::registrar::{CountingSink, RegistrarConfig, RegistrarError, RegistrarLimiter};
///
/// let mut config = RegistrarConfig::default();
/// config.rate_limit_admission_burst = 1;
/// let registrar = RegistrarLimiter::<Op>::builder(config).build(CountingSink::new())?;
/// registrar.enter_admission(b"host-1", Op::Mint)?;
/// let throttled = registrar.enter_admission(b"host-1", Op::Mint).unwrap_err();
/// assert_eq!(throttled.retry_after().secs(), 1); // one token per 500 ms, rounded up
/// let answer: RegistrarError = throttled.into(); // RegistrarBusy { retry_after }
/// assert!(answer.is_retryable());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a throttled invocation returns `RegistrarError::RegistrarBusy` to its caller"]
pub struct Throttled {
    retry_after: RetryAfter,
}

impl Throttled {
    /// How long the caller waits before retrying (whole seconds, at least 1).
    pub fn retry_after(&self) -> RetryAfter {
        self.retry_after
    }
}

impl From<Throttled> for RegistrarError {
    fn from(throttled: Throttled) -> Self {
        RegistrarError::RegistrarBusy {
            retry_after: throttled.retry_after,
        }
    }
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "admission bucket empty: invocation not attempted; retry after {}",
            self.retry_after
        )
    }
}

impl std::error::Error for Throttled {}

impl<V: Verb, S: LimitedSink<V>, C: Clock> RegistrarLimiter<V, S, C> {
    /// Check point 1, at pre-derivation arm entry, before the intent write: charges the
    /// verb's [`Bucket::PredecisionRefusal`] bucket for `identity` at the clock's reading.
    pub fn enter_predecision(&self, identity: &[u8], verb: V) -> Records {
        self.enter_predecision_at(identity, verb, self.limiter.clock().now_ns())
    }

    /// [`RegistrarLimiter::enter_predecision`] at reading `now_ns`.
    ///
    /// With a token: [`Records::Write`]. Without: one event, then [`Records::Skip`]. Never a
    /// throttle: the arm's refusal is determined and permanent, and the limiter suppresses
    /// its records, never its answer.
    pub fn enter_predecision_at(&self, identity: &[u8], verb: V, now_ns: u64) -> Records {
        match self.charge(identity, verb, Bucket::PredecisionRefusal, now_ns) {
            Ok(_) => Records::Write,
            Err(_) => Records::Skip,
        }
    }

    /// Check point 2, at post-derivation arm entry, before the intent write and before any
    /// backend work: charges the verb's [`Bucket::Admission`] bucket for `identity` at the
    /// clock's reading.
    pub fn enter_admission(&self, identity: &[u8], verb: V) -> Result<Admitted, Throttled> {
        self.enter_admission_at(identity, verb, self.limiter.clock().now_ns())
    }

    /// [`RegistrarLimiter::enter_admission`] at reading `now_ns`.
    ///
    /// With a token: [`Admitted`]. Without: one event, then [`Throttled`], whose retry-after
    /// is the time until that bucket holds a token, rounded up to whole seconds, at least 1.
    ///
    /// A verb value missing from [`Verb::ALL`] breaks the [`Verb`] contract; it fails closed
    /// at both check points (limited, with its event, the retry-after one admission refill
    /// interval), so a broken verb type is visible in the counters and never unlimited.
    pub fn enter_admission_at(
        &self,
        identity: &[u8],
        verb: V,
        now_ns: u64,
    ) -> Result<Admitted, Throttled> {
        self.charge(identity, verb, Bucket::Admission, now_ns)
            .map(|via_overflow| Admitted { via_overflow })
            .map_err(|retry_after| Throttled { retry_after })
    }

    /// Charges one token; on refusal emits the one event and returns the retry-after.
    fn charge(
        &self,
        identity: &[u8],
        verb: V,
        bucket: Bucket,
        now_ns: u64,
    ) -> Result<bool, RetryAfter> {
        let refusal = match class_of(verb, bucket) {
            Some(class) => match self.limiter.try_acquire_at(identity, class, now_ns) {
                Ok(grant) => return Ok(grant.via_overflow()),
                Err(LimiterRefused::Limited(limited)) => RetryAfter::from_wait(limited.wait()),
                // The class exists and one token never exceeds a burst of at least 1, so the
                // only invalid charge is a reading ahead of the clock (a caller's bug): fail
                // closed for that caller rather than admit; nothing shared moved.
                Err(LimiterRefused::Invalid(_)) => self.fail_closed_retry_after(bucket),
            },
            // The verb type broke its contract: fail closed, visibly (the event below).
            None => self.fail_closed_retry_after(bucket),
        };
        self.sink.limited(LimitedEvent::new(identity, verb, bucket));
        Err(refusal)
    }

    #[cold]
    fn fail_closed_retry_after(&self, bucket: Bucket) -> RetryAfter {
        let interval = self
            .config
            .bucket_config(bucket)
            .map(|config| config.refill_interval())
            .unwrap_or_default();
        RetryAfter::from_wait(interval)
    }

    /// The limited-invocation sink (for a [`CountingSink`], its counts).
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The configuration the buckets were built from.
    pub fn config(&self) -> &RegistrarConfig {
        &self.config
    }

    /// The clock the check points read.
    pub fn clock(&self) -> &C {
        self.limiter.clock()
    }

    /// Live bucket entries, never above [`RegistrarLimiter::cap`]. One identity that has used
    /// every bucket of a two-verb registrar holds four.
    pub fn len(&self) -> usize {
        self.limiter.len()
    }

    /// Whether no entry is live.
    pub fn is_empty(&self) -> bool {
        self.limiter.is_empty()
    }

    /// The cap on live entries, counted in entries (one per identity, verb and bucket).
    pub fn cap(&self) -> usize {
        self.limiter.cap()
    }

    /// How many charges of `(verb, bucket)` landed on its shared overflow bucket because the
    /// entry table was saturated with drained entries (`None` for a verb missing from
    /// [`Verb::ALL`]).
    pub fn overflow_charges(&self, verb: V, bucket: Bucket) -> Option<u64> {
        self.limiter.overflow_charges(class_of(verb, bucket)?)
    }

    /// Reclaims every entry holding its full burst (an idle sweep); returns how many. A full
    /// entry and an absent one behave alike, so this changes nothing a caller can observe. A
    /// reading ahead of the profile's clock is refused and reclaims nothing.
    pub fn reclaim_full_at(&self, now_ns: u64) -> Result<usize, crate::clock::ReadingAhead> {
        self.limiter.reclaim_full_at(now_ns)
    }

    /// Bytes the profile's limiter holds: fixed at construction, whatever identities arrive.
    pub fn memory_bytes(&self) -> usize {
        self.limiter.memory_bytes()
    }
}

/// The limiter class of `(verb, bucket)`: `verb.index() × 2 + bucket.index()`.
pub(super) fn class_of<V: Verb>(verb: V, bucket: Bucket) -> Option<usize> {
    let verb = verb::position(verb)?;
    Some(verb * Bucket::ALL.len() + bucket.index())
}

impl<V: Verb, S: LimitedSink<V>, C: Clock> fmt::Debug for RegistrarLimiter<V, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistrarLimiter")
            .field("verbs", &V::ALL)
            .field("config", &self.config)
            .field("len", &self.limiter.len())
            .field("cap", &self.limiter.cap())
            .finish_non_exhaustive()
    }
}
