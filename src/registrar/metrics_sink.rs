//! [`MetricsSink`]: the registrar's limited-invocation events as counters.

use super::{Bucket, CountingSink, LimitedEvent, LimitedSink, Verb};
use crate::instrument::{Labels, REGISTRAR_LIMITED};
use ::metrics::{counter, describe_counter, Counter, Unit};
use std::fmt;
use std::marker::PhantomData;

/// A [`LimitedSink`] that counts every limited invocation in
/// `admit_registrar_limited_total{verb, bucket}`, then forwards it to the sink it wraps (a
/// [`CountingSink`] by default, so the in-process counters stay where they were).
///
/// One counter per verb of [`Verb::ALL`] and [`Bucket`], registered by
/// [`MetricsSink::new`] with the recorder current then (see "Attaching" in the [module
/// documentation](crate::metrics)); an event increments one of them, picked by index, and never looks
/// a name up. An event whose verb breaks the [`Verb`] contract (absent from `Verb::ALL`) is
/// not counted here, only forwarded.
///
/// ```
/// use admit::metrics::{Labels, MetricsSink};
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
/// let mut config = RegistrarConfig::default();
/// config.rate_limit_predecision_refusal_burst = 1;
/// let sink = MetricsSink::<Op>::new(CountingSink::new(), &Labels::new());
/// let registrar = RegistrarLimiter::<Op>::builder(config).build(sink)?;
/// assert_eq!(registrar.enter_predecision(b"host-1", Op::Mint), Records::Write);
/// // Limited: counted in admit_registrar_limited_total{verb="mint", bucket="predecision_refusal"}.
/// assert_eq!(registrar.enter_predecision(b"host-1", Op::Mint), Records::Skip);
/// assert_eq!(registrar.sink().inner().count(Bucket::PredecisionRefusal), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MetricsSink<V, S = CountingSink> {
    inner: S,
    /// One counter per (verb, bucket), at `verb.index() × 2 + bucket.index()`.
    counters: Box<[Counter]>,
    verbs: PhantomData<fn(V)>,
}

impl<V: Verb, S> MetricsSink<V, S> {
    /// A sink counting into the recorder current now, with `labels` on every counter, and
    /// forwarding every event to `inner`.
    pub fn new(inner: S, labels: &Labels) -> Self {
        describe_counter!(REGISTRAR_LIMITED.0, Unit::Count, REGISTRAR_LIMITED.1);
        let counters = V::ALL
            .iter()
            .flat_map(|verb| {
                Bucket::ALL.iter().map(move |bucket| {
                    let labels = labels.and("verb", verb.name()).and("bucket", bucket.name());
                    counter!(REGISTRAR_LIMITED.0, labels.labels)
                })
            })
            .collect();
        Self {
            inner,
            counters,
            verbs: PhantomData,
        }
    }

    /// The sink every event is forwarded to.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<V: Verb, S: LimitedSink<V>> LimitedSink<V> for MetricsSink<V, S> {
    fn limited(&self, event: LimitedEvent<'_, V>) {
        let verb = event.verb();
        let index = verb.index();
        // Counters were registered in `V::ALL` order: the verb's are at its index only if it
        // sits there.
        if V::ALL.get(index) == Some(&verb) {
            if let Some(counter) = self
                .counters
                .get(index * Bucket::ALL.len() + event.bucket().index())
            {
                counter.increment(1);
            }
        }
        self.inner.limited(event);
    }
}

impl<V, S: fmt::Debug> fmt::Debug for MetricsSink<V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsSink")
            .field("inner", &self.inner)
            .field("counters", &self.counters.len())
            .finish()
    }
}
