//! Where limited invocations are reported: [`LimitedSink`], [`LimitedEvent`], and the two
//! shipped sinks, [`CountingSink`] and [`NoopSink`].

use super::{Bucket, Verb};
use crate::sync::atomic::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// One limited invocation: who, which verb, and which bucket had no token.
///
/// The identity is borrowed from the caller for the duration of the call; a sink that keeps
/// it must copy it.
///
/// ```
/// use admit::registrar::{Bucket, LimitedEvent, Verb};
///
/// #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// enum Op { Mint }
/// impl Verb for Op {
///     const ALL: &'static [Self] = &[Op::Mint];
///     fn index(self) -> usize { 0 }
///     fn name(self) -> &'static str { "mint" }
/// }
///
/// // What a sink is handed when host-1's mint is limited at check point 2.
/// let event = LimitedEvent::new(b"host-1", Op::Mint, Bucket::Admission);
/// assert_eq!(event.identity(), b"host-1");
/// assert_eq!((event.verb(), event.bucket()), (Op::Mint, Bucket::Admission));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitedEvent<'a, V> {
    identity: &'a [u8],
    verb: V,
    bucket: Bucket,
}

impl<'a, V: Verb> LimitedEvent<'a, V> {
    /// An event. The profile builds these; a test or a wrapping sink may too.
    pub fn new(identity: &'a [u8], verb: V, bucket: Bucket) -> Self {
        Self {
            identity,
            verb,
            bucket,
        }
    }

    /// The opaque client identity, exactly as the verb layer passed it.
    pub fn identity(&self) -> &'a [u8] {
        self.identity
    }

    /// The verb invoked.
    pub fn verb(&self) -> V {
        self.verb
    }

    /// The bucket that had no token.
    pub fn bucket(&self) -> Bucket {
        self.bucket
    }
}

/// Receives one event per limited invocation. The profile holds exactly one sink.
///
/// An invocation is *limited* when a check point found its bucket empty, so its audit records
/// are not written. That happens at both check points; at check point 2 the caller is also
/// throttled. Suppressing the records must not suppress the evidence, so every limited
/// invocation emits exactly one [`LimitedEvent`] through the profile's one sink,
/// before the check point returns. A flood is then visible exactly while it is worst.
///
/// * [`CountingSink`], the default, keeps one `u64` per bucket since it was created: a rising
///   `predecision_refusal` count says someone is flooding malformed input (and those callers
///   still got their real answers); a rising `admission` count says legitimate traffic is
///   being held back and a bring-up may be stalling. Two counters, because the two mean
///   opposite things and a sum cannot be split again.
/// * [`NoopSink`] drops every event.
/// * A sink that does more (say, coalescing events into counted records) wraps another sink
///   and forwards every event to it, so the counting sink stays the one place the counters
///   are kept. The blanket impls for `&S`, `Box<S>` and `Arc<S>` let the wrapped sink stay
///   readable from outside the wrapper.
///
/// # Implementing
///
/// Called on the check point's thread before the check point returns, with no lock held, so
/// an implementation must be quick and must not block on the verb layer. It must not panic.
///
/// A sink that adds behaviour wraps another and forwards to it:
///
/// ```
/// use admit::registrar::{CountingSink, LimitedEvent, LimitedSink, Verb};
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// /// Counts events itself, then hands each to the sink it wraps.
/// struct Forward<S> {
///     seen: AtomicU64,
///     inner: S,
/// }
///
/// impl<V: Verb, S: LimitedSink<V>> LimitedSink<V> for Forward<S> {
///     fn limited(&self, event: LimitedEvent<'_, V>) {
///         // Relaxed: a statistic; it orders nothing else.
///         self.seen.fetch_add(1, Ordering::Relaxed);
///         self.inner.limited(event);
///     }
/// }
///
/// // The wrapped counting sink stays readable through an `Arc` (or a `&`).
/// let counts = std::sync::Arc::new(CountingSink::new());
/// let sink = Forward { seen: AtomicU64::new(0), inner: counts.clone() };
/// # let _ = sink;
/// ```
pub trait LimitedSink<V>: Send + Sync {
    /// One invocation was limited.
    fn limited(&self, event: LimitedEvent<'_, V>);
}

impl<V, S: LimitedSink<V> + ?Sized> LimitedSink<V> for &S {
    fn limited(&self, event: LimitedEvent<'_, V>) {
        (**self).limited(event);
    }
}

impl<V, S: LimitedSink<V> + ?Sized> LimitedSink<V> for Box<S> {
    fn limited(&self, event: LimitedEvent<'_, V>) {
        (**self).limited(event);
    }
}

impl<V, S: LimitedSink<V> + ?Sized> LimitedSink<V> for std::sync::Arc<S> {
    fn limited(&self, event: LimitedEvent<'_, V>) {
        (**self).limited(event);
    }
}

/// A sink that drops every event.
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
/// use admit::registrar::{NoopSink, RegistrarConfig, RegistrarLimiter};
///
/// // Limited invocations are still limited; nobody is told.
/// let registrar = RegistrarLimiter::<Op>::builder(RegistrarConfig::default()).build(NoopSink)?;
/// assert!(registrar.enter_admission(b"host-1", Op::Mint).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoopSink;

impl<V> LimitedSink<V> for NoopSink {
    fn limited(&self, _event: LimitedEvent<'_, V>) {}
}

/// The default sink: one `u64` per bucket, counting limited invocations since it was created,
/// readable in process without a lock.
///
/// # Consistency
///
/// Each counter is exact: every event adds one with a read-modify-write, so no increment is
/// lost however many threads report at once, and a reader sees every increment that happened
/// before it in the same thread or that it otherwise synchronised with. The counters are
/// statistics and publish nothing else: seeing a count move says nothing about what other
/// memory the reporting thread wrote, and [`CountingSink::counts`] reads the two counters one
/// after the other, not as one snapshot.
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
/// use admit::registrar::{Bucket, CountingSink, RegistrarConfig, RegistrarLimiter};
///
/// let mut config = RegistrarConfig::default();
/// config.rate_limit_predecision_refusal_burst = 1;
/// let registrar = RegistrarLimiter::<Op>::builder(config).build(CountingSink::new())?;
/// let _ = registrar.enter_predecision(b"host-1", Op::Mint);
/// let _ = registrar.enter_predecision(b"host-1", Op::Mint); // limited: records skipped
/// assert_eq!(registrar.sink().count(Bucket::PredecisionRefusal), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct CountingSink {
    // Padded apart: a flood on one bucket must not slow the other bucket's counter through
    // false sharing.
    predecision_refusal: CachePadded<AtomicU64>,
    admission: CachePadded<AtomicU64>,
}

/// The two counters of a [`CountingSink`], read one after the other.
///
/// ```
/// use admit::registrar::{CountingSink, LimitedCounts};
///
/// let sink = CountingSink::new();
/// assert_eq!(sink.counts(), LimitedCounts { predecision_refusal: 0, admission: 0 });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitedCounts {
    /// Limited invocations on [`Bucket::PredecisionRefusal`].
    pub predecision_refusal: u64,
    /// Limited invocations on [`Bucket::Admission`] (each was throttled).
    pub admission: u64,
}

impl CountingSink {
    /// Both counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    fn counter(&self, bucket: Bucket) -> &AtomicU64 {
        match bucket {
            Bucket::PredecisionRefusal => &self.predecision_refusal,
            Bucket::Admission => &self.admission,
        }
    }

    /// Limited invocations on `bucket` since this sink was created.
    pub fn count(&self, bucket: Bucket) -> u64 {
        // Relaxed: a statistic; it publishes no other memory (see Consistency).
        self.counter(bucket).load(Ordering::Relaxed)
    }

    /// Both counters.
    pub fn counts(&self) -> LimitedCounts {
        LimitedCounts {
            predecision_refusal: self.count(Bucket::PredecisionRefusal),
            admission: self.count(Bucket::Admission),
        }
    }
}

impl<V> LimitedSink<V> for CountingSink {
    fn limited(&self, event: LimitedEvent<'_, V>) {
        // Relaxed: a statistic; the RMW alone keeps concurrent increments from being lost.
        self.counter(event.bucket).fetch_add(1, Ordering::Relaxed);
    }
}
