//! Building a [`RegistrarLimiter`]: the configuration, the entry cap, the sink, the clock.

use super::checkpoint::RegistrarLimiter;
use super::config::{RegistrarConfig, RegistrarConfigError};
use super::sink::{CountingSink, LimitedSink};
use super::verb::{check_verb_set, VerbSetError};
use super::{Bucket, Verb, REFERENCE_CAP};
use crate::clock::{Clock, RecentClock};
use crate::limiter::{Limiter, LimiterConfigError};
use std::fmt;
use std::marker::PhantomData;

/// Builds a [`RegistrarLimiter`]:
/// `RegistrarLimiter::<MyVerb>::builder(config).build(CountingSink::new())`.
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
/// let registrar = RegistrarLimiter::<Op>::builder(RegistrarConfig::default())
///     .cap(1_024) // identities × verbs × 2 buckets held at once
///     .build(CountingSink::new())?;
/// assert_eq!(registrar.cap(), 1_024);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RegistrarBuilder<V> {
    config: RegistrarConfig,
    cap: usize,
    /// Labels for the inner limiter's counters and gauges, if attached.
    #[cfg(feature = "metrics")]
    metrics: Option<crate::instrument::Labels>,
    verbs: PhantomData<fn(V)>,
}

/// Why a [`RegistrarLimiter`] could not be built. Each variant names what to change.
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
/// use admit::registrar::{NoopSink, RegistrarBuildError, RegistrarConfig, RegistrarLimiter};
///
/// let mut config = RegistrarConfig::default();
/// config.rate_limit_admission_burst = 0;
/// let err = RegistrarLimiter::<Op>::builder(config).build(NoopSink).unwrap_err();
/// assert!(matches!(err, RegistrarBuildError::Config(_)));
/// println!("{err}"); // names `rate_limit_admission_burst` and why 0 is refused
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrarBuildError {
    /// A `rate_limit_*` key is invalid.
    Config(RegistrarConfigError),
    /// The verb type breaks the [`Verb`] contract.
    Verbs(VerbSetError),
    /// The entry cap (or the number of verbs) is out of range.
    Limiter(LimiterConfigError),
}

impl fmt::Display for RegistrarBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(err) => err.fmt(f),
            Self::Verbs(err) => err.fmt(f),
            Self::Limiter(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for RegistrarBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(err) => Some(err),
            Self::Verbs(err) => Some(err),
            Self::Limiter(err) => Some(err),
        }
    }
}

impl From<RegistrarConfigError> for RegistrarBuildError {
    fn from(err: RegistrarConfigError) -> Self {
        Self::Config(err)
    }
}

// The entry point lives beside the builder it returns, so that `checkpoint` (the limiter's
// check points) never imports `builder`, which imports it.
impl<V: Verb> RegistrarLimiter<V, CountingSink, RecentClock> {
    /// A builder over `config`, with the default entry cap
    /// ([`REFERENCE_CAP`], 256 entries).
    pub fn builder(config: RegistrarConfig) -> RegistrarBuilder<V> {
        RegistrarBuilder::new(config)
    }
}

impl<V: Verb> RegistrarBuilder<V> {
    /// A builder over `config`, with the default cap of [`REFERENCE_CAP`] (256) entries.
    pub fn new(config: RegistrarConfig) -> Self {
        Self {
            config,
            cap: REFERENCE_CAP,
            #[cfg(feature = "metrics")]
            metrics: None,
            verbs: PhantomData,
        }
    }

    /// The most live bucket entries, counted in entries: one per (identity, verb, bucket).
    /// The default, 256, is the reference deployment's 64 identities × 4 buckets; there is
    /// effectively one registrar identity, so normal operation never reaches it. It exists so
    /// that an identity that changes on every connection cannot exhaust memory.
    pub fn cap(mut self, cap: usize) -> Self {
        self.cap = cap;
        self
    }

    /// Counts every decision of the profile's limiter in `admit_limiter_decisions_total` (and
    /// sets `admit_limiter_entries` and `admit_limiter_cap`) with `labels`, like
    /// [`LimiterBuilder::metrics`](crate::limiter::LimiterBuilder::metrics). Its classes are
    /// `verb.index() × 2 + bucket`, the bucket 0 for `predecision_refusal` and 1 for
    /// `admission` ([`Bucket::ALL`] order): class `"3"` is the second verb's admission bucket.
    /// The limited invocations themselves go to the sink ([`MetricsSink`](crate::metrics::MetricsSink)
    /// counts them by verb and bucket name).
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
    /// use admit::metrics::Labels;
    /// use admit::registrar::{CountingSink, RegistrarConfig, RegistrarLimiter};
    ///
    /// let registrar = RegistrarLimiter::<Op>::builder(RegistrarConfig::default())
    ///     .metrics(&Labels::new().with("profile", "registrar"))
    ///     .build(CountingSink::new())?;
    /// # let _ = registrar;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics(mut self, labels: &crate::instrument::Labels) -> Self {
        self.metrics = Some(labels.clone());
        self
    }

    /// A profile reporting to `sink`, over the monotonic clock.
    pub fn build<S: LimitedSink<V>>(
        self,
        sink: S,
    ) -> Result<RegistrarLimiter<V, S, RecentClock>, RegistrarBuildError> {
        self.build_with_clock(sink, RecentClock::new())
    }

    /// A profile reporting to `sink`, reading `clock`.
    pub fn build_with_clock<S: LimitedSink<V>, C: Clock>(
        self,
        sink: S,
        clock: C,
    ) -> Result<RegistrarLimiter<V, S, C>, RegistrarBuildError> {
        check_verb_set::<V>().map_err(RegistrarBuildError::Verbs)?;
        self.config.validate()?;
        // Two classes per verb, in `Bucket::ALL` order: class = verb × 2 + bucket.
        let mut classes = Vec::with_capacity(V::ALL.len().saturating_mul(Bucket::ALL.len()));
        for _ in V::ALL {
            for bucket in Bucket::ALL {
                classes.push(self.config.bucket_config(bucket)?);
            }
        }
        let builder = Limiter::builder().cap(self.cap);
        #[cfg(feature = "metrics")]
        let builder = match &self.metrics {
            Some(labels) => builder.metrics(labels),
            None => builder,
        };
        let limiter = builder
            .build_with_clock(classes, clock)
            .map_err(RegistrarBuildError::Limiter)?;
        Ok(RegistrarLimiter {
            limiter,
            sink,
            config: self.config,
            verbs: PhantomData,
        })
    }
}
