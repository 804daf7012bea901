//! Building a [`Limiter`]: the cap, the classes, the clock; every bad number a typed error.

use super::{Limiter, DEFAULT_CAP};
use crate::bucket::BucketConfig;
use crate::clock::tick::Tick;
use crate::clock::{Clock, RecentClock};
use crate::table::{CapProblem, Geometry, KeyHasher, MAX_CAP};
use std::fmt;

/// Why a limiter could not be built. Each variant names the setting to change.
///
/// ```
/// use admit::{BucketConfig, Limiter, LimiterConfigError};
///
/// let class = BucketConfig::per_second(10)?;
/// assert_eq!(Limiter::builder().cap(0).build([class]).unwrap_err(), LimiterConfigError::ZeroCap);
/// assert_eq!(Limiter::builder().build([]).unwrap_err(), LimiterConfigError::NoClasses);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimiterConfigError {
    /// `cap` was 0: no identity could ever have an entry.
    ZeroCap,
    /// `cap` was above the largest table this crate builds.
    CapTooLarge {
        /// The cap asked for.
        cap: usize,
        /// The largest cap accepted.
        max: usize,
    },
    /// No class was given: there would be nothing to charge.
    NoClasses,
    /// More classes than a charge can name (65,536).
    TooManyClasses {
        /// Classes given.
        classes: usize,
    },
    /// A class refills in whole milliseconds but cannot be counted in microseconds, which
    /// another class needs (its interval is not whole milliseconds): a limiter counts all of
    /// its classes in one unit, and in microseconds the refill span is at most
    /// [`BucketConfig::MAX_FINE_REFILL_SPAN`] (about 3.18 days) and the interval at most
    /// `u32::MAX` µs (about 71.6 minutes).
    CoarseClassTooLong {
        /// The class that does not fit.
        class: usize,
        /// Its config.
        config: BucketConfig,
        /// The first class that needs microseconds.
        fine_class: usize,
    },
    /// [`Limiter::set_config`] or [`Limiter::check_config`] named a class the limiter was not
    /// built with.
    UnknownClass {
        /// The class asked for.
        class: usize,
        /// How many classes the limiter has (valid classes are `0..classes`).
        classes: usize,
    },
    /// A config handed to [`Limiter::set_config`] does not fit the unit the limiter counts
    /// time in, fixed at build: a limiter counting whole milliseconds cannot take an interval
    /// that is not whole milliseconds, and one counting microseconds (some class refilled
    /// faster than whole milliseconds at build) cannot take a refill span longer than
    /// [`BucketConfig::MAX_FINE_REFILL_SPAN`] or an interval longer than `u32::MAX` µs.
    ClassDoesNotFit {
        /// The class being changed.
        class: usize,
        /// The config refused.
        config: BucketConfig,
        /// Whether the limiter counts microseconds (else whole milliseconds).
        counted_in_micros: bool,
    },
    /// A class's burst is above [`LimiterConfigError::MAX_CLASS_BURST`]: a limiter class's
    /// config word keeps its top bit for the era of the class's runtime changes.
    ClassBurstTooLarge {
        /// The class.
        class: usize,
        /// The burst asked for.
        burst: u32,
    },
    /// A change of the class to this config would carry a debt longer than the unit's longest
    /// span: the longest debt the class's configs since build allow, repaid at the new
    /// interval (see [`BucketConfigError::DebtBeyondUnit`](crate::BucketConfigError)). Refused,
    /// changing nothing, so that no change cuts a debt a revert would then forgive.
    DebtBeyondUnit {
        /// The class being changed.
        class: usize,
        /// The longest debt the change would carry.
        carried: std::time::Duration,
        /// The longest the limiter's unit holds.
        longest: std::time::Duration,
    },
}

impl LimiterConfigError {
    /// The largest burst a limiter class takes: 2^31 − 1 tokens.
    pub const MAX_CLASS_BURST: u32 = super::era::MAX_CLASS_BURST;
}

impl fmt::Display for LimiterConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCap => write!(
                f,
                "`cap` is 0: the entry table could hold no identity; the default is {DEFAULT_CAP}"
            ),
            Self::CapTooLarge { cap, max } => write!(
                f,
                "`cap` is {cap}, above the largest supported table of {max} entries"
            ),
            Self::NoClasses => f.write_str("no classes given: a limiter needs at least one"),
            Self::TooManyClasses { classes } => write!(
                f,
                "{classes} classes given; a limiter supports at most 65536"
            ),
            Self::CoarseClassTooLong {
                class,
                config,
                fine_class,
            } => write!(
                f,
                "class {fine_class} refills faster than whole milliseconds, so this limiter \
                 counts every class in microseconds, where a refill span is at most {:?} (about \
                 3.18 days) and an interval at most {} µs; class {class} (burst {}, one token \
                 every {:?}) does not fit: give the fast class a limiter of its own, or shorten \
                 class {class}'s burst or interval",
                BucketConfig::MAX_FINE_REFILL_SPAN,
                u32::MAX,
                config.burst(),
                config.refill_interval(),
            ),
            Self::UnknownClass { class, classes } => write!(
                f,
                "class {class} does not exist: this limiter was built with {classes} classes \
                 (0 to {}); a class cannot be added at runtime",
                classes.saturating_sub(1)
            ),
            Self::ClassDoesNotFit {
                class,
                config,
                counted_in_micros: false,
            } => write!(
                f,
                "class {class} cannot refill one token every {:?} (burst {}): this limiter \
                 counts time in whole milliseconds, fixed when it was built, and that interval \
                 is not whole milliseconds; use a whole-millisecond interval, or build a new \
                 limiter",
                config.refill_interval(),
                config.burst(),
            ),
            Self::ClassDoesNotFit {
                class,
                config,
                counted_in_micros: true,
            } => write!(
                f,
                "class {class} cannot take burst {} with one token every {:?}: this limiter \
                 counts time in microseconds, fixed when it was built, where a refill span is at \
                 most {:?} (about 3.18 days) and an interval at most {} µs; lower the burst or \
                 the interval, or give this class a limiter of its own",
                config.burst(),
                config.refill_interval(),
                BucketConfig::MAX_FINE_REFILL_SPAN,
                u32::MAX,
            ),
            Self::ClassBurstTooLarge { class, burst } => write!(
                f,
                "class {class} has a burst of {burst} tokens; a limiter class holds at most {} \
                 (its config word keeps one bit to carry tokens owed over runtime changes); \
                 lower the burst",
                Self::MAX_CLASS_BURST,
            ),
            Self::DebtBeyondUnit {
                class,
                carried,
                longest,
            } => write!(
                f,
                "class {class} refused, nothing changed: at this interval the longest debt its \
                 configs allow would take {carried:?} to repay, beyond the {longest:?} the \
                 limiter's unit can hold; carried, it would be cut and a revert would forgive \
                 the rest. Choose a shorter interval, or a new limiter for this rate"
            ),
        }
    }
}

impl std::error::Error for LimiterConfigError {}

/// Builds a [`Limiter`]. `Limiter::builder().cap(512).build(classes)`.
///
/// ```
/// use admit::{BucketConfig, Limiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::builder()
///     .cap(4_096)
///     .build_with_clock([BucketConfig::per_second(100)?, BucketConfig::per_minute(10)?], clock)?;
/// assert_eq!((limiter.cap(), limiter.classes()), (4_096, 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct LimiterBuilder {
    geometry: Geometry,
    /// The table's secret SipHash keys, drawn when the builder is made.
    hasher: KeyHasher,
    /// The labels of the counters and gauges to attach at build, if any.
    #[cfg(feature = "metrics")]
    metrics: Option<crate::instrument::Labels>,
}

impl Default for LimiterBuilder {
    fn default() -> Self {
        Self {
            geometry: Geometry::new(DEFAULT_CAP),
            hasher: KeyHasher::random(),
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }
}

impl LimiterBuilder {
    /// The most live entries, counted in entries (one per identity and class), default
    /// [`DEFAULT_CAP`].
    ///
    /// The table is allocated once, at build: `⌈2.5 × cap⌉` slots of 12 bytes, 30 bytes per
    /// unit of cap (the default 65,536 takes 1.9 MiB; a cap of 2^20 takes 30 MiB). Keyed by
    /// client IP, size the cap for the clients active within one refill span (`burst ×
    /// interval`):
    /// entries refilled to full are reclaimed, so that is how many must fit at once; past
    /// the cap, newcomers share the class's overflow bucket.
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter};
    /// use std::time::Duration;
    ///
    /// // Up to 65,536 clients inside one 10-second refill span: under 2 MiB, fixed.
    /// let limiter = Limiter::builder().cap(65_536).build([BucketConfig::new(10, Duration::from_millis(1_000))?])?;
    /// assert_eq!(limiter.cap(), 65_536);
    /// assert!(limiter.memory_bytes() < 2 << 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cap(mut self, cap: usize) -> Self {
        self.geometry.cap = cap;
        self
    }

    /// Counts every charge in `admit_limiter_decisions_total{class, outcome}` and keeps the
    /// `admit_limiter_entries` and `admit_limiter_cap` gauges, each with `labels` (see
    /// [`crate::metrics`] for the names, what moves them, and what a decision costs).
    ///
    /// The handles are registered by `build`, with the recorder current then: install the
    /// recorder first. Without this call the limiter records nothing.
    ///
    /// ```
    /// use admit::metrics::Labels;
    /// use admit::{BucketConfig, Limiter};
    ///
    /// let limiter = Limiter::builder()
    ///     .cap(1_024)
    ///     .metrics(&Labels::new().with("limiter", "api"))
    ///     .build([BucketConfig::per_second(100)?, BucketConfig::per_minute(10)?])?;
    /// assert!(limiter.try_acquire("tenant-1", 1).is_ok()); // {class="1", outcome="admitted"}
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics(mut self, labels: &crate::instrument::Labels) -> Self {
        self.metrics = Some(labels.clone());
        self
    }

    /// Tiny tables for loom models: `slots_per_entry` slots per unit of cap, a window of
    /// `window` slots (two blocks of `window / 2`; one slot for 1). Not part of the supported
    /// API.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn geometry(mut self, slots_per_entry: usize, window: usize) -> Self {
        self.geometry = Geometry::model(self.geometry.cap, slots_per_entry, window);
        self
    }

    /// Fixed SipHash keys instead of random ones, so a loom model replays the same placement
    /// in every execution. Not part of the supported API: fixed keys let clients aim.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn hash_keys(mut self, k0: u64, k1: u64) -> Self {
        self.hasher = KeyHasher::with_keys(k0, k1);
        self
    }

    /// A limiter over the monotonic clock, one class per config (class `i` is the `i`-th).
    pub fn build(
        self,
        classes: impl IntoIterator<Item = BucketConfig>,
    ) -> Result<Limiter<RecentClock>, LimiterConfigError> {
        self.build_with_clock(classes, RecentClock::new())
    }

    /// A limiter reading `clock`.
    pub fn build_with_clock<C: Clock>(
        self,
        classes: impl IntoIterator<Item = BucketConfig>,
        clock: C,
    ) -> Result<Limiter<C>, LimiterConfigError> {
        self.geometry.validate().map_err(|problem| match problem {
            CapProblem::Zero => LimiterConfigError::ZeroCap,
            CapProblem::TooLarge => LimiterConfigError::CapTooLarge {
                cap: self.geometry.cap,
                max: MAX_CAP,
            },
        })?;
        let classes: Vec<BucketConfig> = classes.into_iter().collect();
        if classes.is_empty() {
            return Err(LimiterConfigError::NoClasses);
        }
        if classes.len() > usize::from(u16::MAX) + 1 {
            return Err(LimiterConfigError::TooManyClasses {
                classes: classes.len(),
            });
        }
        if let Some((class, config)) = classes
            .iter()
            .enumerate()
            .find(|(_, c)| c.burst() > LimiterConfigError::MAX_CLASS_BURST)
        {
            return Err(LimiterConfigError::ClassBurstTooLarge {
                class,
                burst: config.burst(),
            });
        }
        // One unit for the whole table: microseconds if any class needs them.
        let fine_class = classes.iter().position(|c| c.tick() == Tick::Micros);
        let (classes, tick) = match fine_class {
            None => (classes, Tick::Millis),
            Some(fine_class) => {
                let fine = classes
                    .iter()
                    .enumerate()
                    .map(|(class, config)| {
                        config
                            .in_micros()
                            .map_err(|_| LimiterConfigError::CoarseClassTooLong {
                                class,
                                config: *config,
                                fine_class,
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (fine, Tick::Micros)
            }
        };
        #[cfg_attr(not(feature = "metrics"), allow(unused_mut))]
        let mut limiter = Limiter::assemble(self.geometry, &self.hasher, classes, tick, clock);
        #[cfg(feature = "metrics")]
        if let Some(labels) = &self.metrics {
            limiter.attach(labels);
        }
        Ok(limiter)
    }
}
