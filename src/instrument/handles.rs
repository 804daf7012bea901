//! The handles an instrumented primitive holds, registered once when it is made; the decision
//! paths only index them and increment.

use super::Labels;
use ::metrics::{counter, describe_counter, describe_gauge, gauge, Counter, Gauge, Unit};

/// Names and descriptions, as in the table of the [module documentation](crate::metrics).
const LIMITER_DECISIONS: (&str, &str) = (
    "admit_limiter_decisions_total",
    "Charges of the keyed limiter, by class and outcome (admitted, overflow, refused, would_refuse).",
);
const LIMITER_ENTRIES: (&str, &str) = (
    "admit_limiter_entries",
    "Live entries in the keyed limiter's table.",
);
const LIMITER_CAP: (&str, &str) = (
    "admit_limiter_cap",
    "The most live entries the keyed limiter's table holds.",
);
const INFLIGHT_DECISIONS: (&str, &str) = (
    "admit_inflight_decisions_total",
    "Acquires of the in-flight quotas, by outcome (admitted, overflow, refused, would_refuse).",
);
const INFLIGHT_OPS: (&str, &str) = (
    "admit_inflight_ops",
    "Ops in flight under the in-flight quotas, all actors, as last read.",
);
const INFLIGHT_OVERFLOW_OPS: (&str, &str) = (
    "admit_inflight_overflow_ops",
    "Ops in flight counted in the in-flight quotas' shared overflow, as last read.",
);
const VOLUME_DECISIONS: (&str, &str) = (
    "admit_volume_decisions_total",
    "Writes charged to the volume quota, by outcome (admitted, refused, would_refuse).",
);
const BUCKET_DECISIONS: (&str, &str) = (
    "admit_bucket_decisions_total",
    "Takes of the token bucket, by outcome (admitted, refused, would_refuse).",
);
pub(crate) const REGISTRAR_LIMITED: (&str, &str) = (
    "admit_registrar_limited_total",
    "Limited invocations of the registrar profile, by verb and bucket.",
);

/// The counters of one primitive (and, for the limiter, one class): one per outcome.
#[derive(Debug)]
pub(crate) struct Outcomes {
    admitted: Counter,
    overflow: Counter,
    refused: Counter,
    /// Refusals admitted in shadow mode (see `crate::shadow`).
    would_refuse: Counter,
}

impl Outcomes {
    /// Registers `name{labels, outcome}` for the four outcomes, or for three (`overflow` a no-op
    /// handle, never registered) if the primitive has no shared overflow budget.
    fn register(name: &'static str, labels: &Labels, with_overflow: bool) -> Self {
        let one = |outcome: &'static str| counter!(name, labels.and("outcome", outcome).labels);
        Self {
            admitted: one("admitted"),
            overflow: if with_overflow {
                one("overflow")
            } else {
                Counter::noop()
            },
            refused: one("refused"),
            would_refuse: one("would_refuse"),
        }
    }

    /// No-op handles: what a limiter's class holds until metrics are attached.
    pub(crate) fn noop() -> Self {
        Self {
            admitted: Counter::noop(),
            overflow: Counter::noop(),
            refused: Counter::noop(),
            would_refuse: Counter::noop(),
        }
    }

    /// The counters of one class of a limiter.
    pub(crate) fn limiter_class(labels: &Labels, class: usize) -> Self {
        Self::register(
            LIMITER_DECISIONS.0,
            &labels.and("class", class.to_string()),
            true,
        )
    }

    /// The counters of a volume quota.
    pub(crate) fn volume(labels: &Labels) -> Self {
        describe_counter!(VOLUME_DECISIONS.0, Unit::Count, VOLUME_DECISIONS.1);
        Self::register(VOLUME_DECISIONS.0, labels, false)
    }

    /// The counters of a token bucket.
    pub(crate) fn bucket(labels: &Labels) -> Self {
        describe_counter!(BUCKET_DECISIONS.0, Unit::Count, BUCKET_DECISIONS.1);
        Self::register(BUCKET_DECISIONS.0, labels, false)
    }

    /// Counts one decision.
    #[inline]
    pub(crate) fn record(&self, granted: bool, via_overflow: bool) {
        let counter = match (granted, via_overflow) {
            (true, false) => &self.admitted,
            (true, true) => &self.overflow,
            (false, _) => &self.refused,
        };
        counter.increment(1);
    }

    /// Counts one refusal that shadow mode admitted.
    #[inline]
    pub(crate) fn record_would_refuse(&self) {
        self.would_refuse.increment(1);
    }
}

/// A limiter's gauges; each class holds its own [`Outcomes`], beside its config, so that a
/// charge reaches them without another lookup.
#[derive(Debug)]
pub(crate) struct LimiterMetrics {
    entries: Gauge,
    /// Set once; kept so that a recorder that forgets dropped handles keeps the series.
    _cap: Gauge,
}

impl LimiterMetrics {
    /// Registers the gauges and sets the cap (the classes register their counters with
    /// [`Outcomes::limiter_class`]).
    pub(crate) fn register(labels: &Labels, cap: usize) -> Self {
        describe_counter!(LIMITER_DECISIONS.0, Unit::Count, LIMITER_DECISIONS.1);
        describe_gauge!(LIMITER_ENTRIES.0, Unit::Count, LIMITER_ENTRIES.1);
        describe_gauge!(LIMITER_CAP.0, Unit::Count, LIMITER_CAP.1);
        let cap_gauge = gauge!(LIMITER_CAP.0, labels.labels.clone());
        cap_gauge.set(cap as f64);
        Self {
            entries: gauge!(LIMITER_ENTRIES.0, labels.labels.clone()),
            _cap: cap_gauge,
        }
    }

    /// The table now holds `len` entries.
    #[cold]
    pub(crate) fn entries(&self, len: usize) {
        self.entries.set(len as f64);
    }

    /// Heap bytes of the gauges' handles (not of the recorder's storage behind them).
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

/// The in-flight quotas' handles.
#[derive(Debug)]
pub(crate) struct InFlightMetrics {
    decisions: Outcomes,
    ops: Gauge,
    overflow_ops: Gauge,
}

impl InFlightMetrics {
    /// Registers the counters and the two gauges.
    pub(crate) fn register(labels: &Labels) -> Self {
        describe_counter!(INFLIGHT_DECISIONS.0, Unit::Count, INFLIGHT_DECISIONS.1);
        describe_gauge!(INFLIGHT_OPS.0, Unit::Count, INFLIGHT_OPS.1);
        describe_gauge!(
            INFLIGHT_OVERFLOW_OPS.0,
            Unit::Count,
            INFLIGHT_OVERFLOW_OPS.1
        );
        Self {
            decisions: Outcomes::register(INFLIGHT_DECISIONS.0, labels, true),
            ops: gauge!(INFLIGHT_OPS.0, labels.labels.clone()),
            overflow_ops: gauge!(INFLIGHT_OVERFLOW_OPS.0, labels.labels.clone()),
        }
    }

    /// Counts one acquire.
    #[inline]
    pub(crate) fn record(&self, granted: bool, via_overflow: bool) {
        self.decisions.record(granted, via_overflow);
    }

    /// Counts one refusal that shadow mode admitted.
    #[inline]
    pub(crate) fn record_would_refuse(&self) {
        self.decisions.record_would_refuse();
    }

    /// `total` ops are in flight, all actors together.
    #[cold]
    pub(crate) fn in_flight(&self, total: u64) {
        self.ops.set(total as f64);
    }

    /// `overflow` of them are counted in the shared overflow.
    #[cold]
    pub(crate) fn overflow(&self, overflow: u32) {
        self.overflow_ops.set(overflow);
    }
}
