//! Building [`Quotas`]: the quota, the overrides, the number of actors; every bad number a
//! typed error.

use super::overrides::{Overrides, DEFAULT_OVERRIDE_CAPACITY};
use super::{sketch, Quotas, QuotasConfigError, Shared, DEFAULT_ACTORS, DEFAULT_QUOTA};
use crate::sync::atomic::{AtomicU32, AtomicU64};
use crate::sync::Arc;
use crate::table::{CapProblem, Geometry, KeyHasher, Table, MAX_CAP};
use crossbeam_utils::CachePadded;
use sketch::Sketch;
use std::collections::HashMap;
use std::hash::Hash;

/// Builds [`Quotas`]: `Quotas::builder().quota(16).actors(4096).build()`.
///
/// The table's secret hash keys are drawn when the builder is made (so that
/// [`QuotasBuilder::override_quota`] can hash its actor then): tables built from clones of one
/// builder share their keys, and a fresh `Quotas::builder()` draws new ones.
///
/// ```
/// use admit::fairness::Quotas;
///
/// let quotas = Quotas::builder()
///     .quota(4) // every actor: at most 4 ops awaiting the writer
///     .override_quota("importer", 16) // one trusted batch actor gets more
///     .actors(8_192) // actors that can hold an entry of their own at once
///     .build()?;
/// assert_eq!(quotas.limit_of("importer"), 16);
/// assert_eq!(quotas.limit_of("anyone-else"), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct QuotasBuilder {
    limit: u32,
    geometry: Geometry,
    /// Overridden quotas by the actor's 64-bit hash under `hasher`.
    overrides: HashMap<u64, u32>,
    /// How many distinct actors may hold an override, at build and at runtime together.
    override_capacity: usize,
    /// The table's SipHash keys, drawn when the builder is made, so that an override can be
    /// hashed when it is given (its actor's type is known only then). Sized for the table at
    /// `build`; its `Debug` never prints the keys.
    hasher: KeyHasher,
    sketch_cols: usize,
    /// Rows of the sketch in use; fewer only in loom models.
    #[cfg(any(test, admit_loom, fuzzing))]
    sketch_rows: usize,
    /// The labels of the counters and gauges to attach at build, if any.
    #[cfg(feature = "metrics")]
    metrics: Option<crate::instrument::Labels>,
}

impl Default for QuotasBuilder {
    fn default() -> Self {
        Self {
            limit: DEFAULT_QUOTA,
            geometry: Geometry::new(DEFAULT_ACTORS),
            overrides: HashMap::new(),
            override_capacity: DEFAULT_OVERRIDE_CAPACITY,
            hasher: KeyHasher::random(),
            sketch_cols: sketch::DEFAULT_COLS,
            #[cfg(any(test, admit_loom, fuzzing))]
            sketch_rows: sketch::ROWS,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }
}

impl QuotasBuilder {
    /// The quota of every actor without an override ([`DEFAULT_QUOTA`] by default).
    pub fn quota(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// How many actors can hold an entry of their own at once ([`DEFAULT_ACTORS`]).
    pub fn actors(mut self, actors: usize) -> Self {
        self.geometry.cap = actors;
        self
    }

    /// How many distinct actors may be given an override, at build
    /// ([`QuotasBuilder::override_quota`]) and at runtime ([`Quotas::set_override`]) together:
    /// at least those given here, [`DEFAULT_OVERRIDE_CAPACITY`] by default. The override slots
    /// are fixed at build (16 bytes per actor, twice over), so that an acquire looks an override
    /// up without a lock; a runtime override for one more actor beyond the capacity is refused
    /// with [`QuotasConfigError::TooManyOverrides`]. Removing an override keeps its actor's
    /// slot, so the capacity counts actors ever given one.
    ///
    /// ```
    /// use admit::fairness::{Quotas, QuotasConfigError};
    ///
    /// let quotas = Quotas::builder().override_capacity(1).build()?;
    /// quotas.set_override("importer", Some(64))?;
    /// assert_eq!(
    ///     quotas.set_override("exporter", Some(64)),
    ///     Err(QuotasConfigError::TooManyOverrides { capacity: 1 })
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn override_capacity(mut self, actors: usize) -> Self {
        self.override_capacity = actors;
        self
    }

    /// A quota for one actor, replacing the default for it (0 is refused at `build`).
    ///
    /// The actor must be named with the same kind of type it is acquired with: an override for
    /// `"a"` does not apply to `b"a"` (see "Any key, one type per actor").
    pub fn override_quota<K: Hash + ?Sized>(mut self, actor: &K, limit: u32) -> Self {
        // The hash does not depend on the table's size, so it is the one acquires compute.
        self.overrides.insert(self.hasher.hash(actor, 0), limit);
        self
    }

    /// Counts every acquire in `admit_inflight_decisions_total{outcome}` and keeps the
    /// `admit_inflight_ops` and `admit_inflight_overflow_ops` gauges (set when
    /// [`Quotas::total_in_flight`] is read), each with `labels` (see [`crate::metrics`]).
    ///
    /// The handles are registered by `build`, with the recorder current then: install the
    /// recorder first. Without this call the quotas record nothing.
    ///
    /// ```
    /// use admit::fairness::Quotas;
    /// use admit::metrics::Labels;
    ///
    /// let quotas = Quotas::builder().quota(2).metrics(&Labels::new().with("writer", "main")).build()?;
    /// let permit = quotas.try_acquire("agent-7")?; // {outcome="admitted"}
    /// assert_eq!(quotas.total_in_flight(), 1); // and admit_inflight_ops = 1
    /// drop(permit);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics(mut self, labels: &crate::instrument::Labels) -> Self {
        self.metrics = Some(labels.clone());
        self
    }

    /// Tiny tables and fixed hash keys for loom models. Not part of the supported API.
    /// Call it before any `override_quota`: overrides are hashed under the keys of the moment.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn model_geometry(
        mut self,
        slots_per_entry: usize,
        window: usize,
        keys: (u64, u64),
    ) -> Self {
        self.geometry = Geometry::model(self.geometry.cap, slots_per_entry, window);
        debug_assert!(
            self.overrides.is_empty(),
            "model_geometry after override_quota: the overrides were hashed under other keys"
        );
        self.hasher = KeyHasher::with_keys(keys.0, keys.1);
        self
    }

    /// A smaller overflow-places sketch (`cols` cells a row) for loom models. Not part of the
    /// supported API.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn model_sketch(mut self, cols: usize) -> Self {
        self.sketch_cols = cols;
        self
    }

    /// A sketch of `rows` rows (1 to 4) for loom models, which explore fewer states with fewer
    /// cells per actor. Not part of the supported API.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn model_sketch_rows(mut self, rows: usize) -> Self {
        self.sketch_rows = rows;
        self
    }

    /// The labels of the metrics to attach, if any.
    #[cfg(feature = "metrics")]
    pub(super) fn metrics_labels(&self) -> Option<&crate::instrument::Labels> {
        self.metrics.as_ref()
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Quotas, QuotasConfigError> {
        if self.limit == 0 || self.overrides.values().any(|&l| l == 0) {
            return Err(QuotasConfigError::ZeroQuota);
        }
        self.geometry.validate().map_err(|problem| match problem {
            CapProblem::Zero => QuotasConfigError::ZeroActors,
            CapProblem::TooLarge => QuotasConfigError::TooManyActors {
                actors: self.geometry.cap,
                max: MAX_CAP,
            },
        })?;
        Ok(self.assemble())
    }

    /// Builds from settings already known to be valid.
    fn sketch(&self) -> Sketch {
        let sketch = Sketch::new(self.sketch_cols);
        #[cfg(any(test, admit_loom, fuzzing))]
        let sketch = sketch.with_rows(self.sketch_rows);
        sketch
    }

    pub(super) fn assemble(self) -> Quotas {
        let table = Table::new(self.geometry);
        let hasher = self.hasher.for_shape(table.shape());
        let sketch = self.sketch();
        Quotas {
            shared: Arc::new(Shared {
                table,
                hasher,
                limit: AtomicU32::new(self.limit),
                overrides: Overrides::new(self.override_capacity, self.overrides.into_iter()),
                overflow: CachePadded::new(AtomicU32::new(0)),
                sketch,
                unlimited: CachePadded::new(AtomicU32::new(0)),
                shadow: crate::shadow::Shadow::new(),
                absent: CachePadded::new(AtomicU64::new(0)),
                next_scan: AtomicU64::new(0),
                waiters: CachePadded::new(AtomicU32::new(0)),
                epoch: CachePadded::new(AtomicU32::new(0)),
                #[cfg(feature = "metrics")]
                metrics: self
                    .metrics
                    .as_ref()
                    .map(|labels| Box::new(crate::instrument::InFlightMetrics::register(labels))),
                #[cfg(feature = "tracing")]
                digest: crate::trace::Digest::random(),
            }),
        }
    }
}
