//! The adaptive total's gauges and counters (feature `metrics`): L, the latency estimate,
//! refusals per class. Set once a window and on refusals, never on an admission.

use super::Priority;
use crate::instrument::Labels;
use ::metrics::{counter, describe_counter, describe_gauge, gauge, Counter, Gauge, Unit};

const LIMIT: (&str, &str) = (
    "admit_inflight_total_limit",
    "The adaptive total's limit L on ops in flight across all actors, as last stepped.",
);
const LATENCY: (&str, &str) = (
    "admit_inflight_latency_seconds",
    "The adaptive total's latency estimate: the last window's mean time from admission to decision.",
);
const REFUSED: (&str, &str) = (
    "admit_inflight_total_refused_total",
    "Ops the adaptive total refused, by priority class.",
);

/// The handles, registered at build.
#[derive(Debug)]
pub(crate) struct CapacityMetrics {
    limit: Gauge,
    latency: Gauge,
    refused: [Counter; 3],
}

impl CapacityMetrics {
    pub(crate) fn register(labels: &Labels) -> Self {
        describe_gauge!(LIMIT.0, Unit::Count, LIMIT.1);
        describe_gauge!(LATENCY.0, Unit::Seconds, LATENCY.1);
        describe_counter!(REFUSED.0, Unit::Count, REFUSED.1);
        Self {
            limit: gauge!(LIMIT.0, labels.labels.clone()),
            latency: gauge!(LATENCY.0, labels.labels.clone()),
            refused: Priority::ALL
                .map(|p| counter!(REFUSED.0, labels.and("priority", p.as_str()).labels)),
        }
    }

    /// A window closed with L now `limit` and (if it had samples) a mean of `mean_ns`.
    #[cold]
    pub(crate) fn window(&self, limit: u32, mean_ns: u64, measured: bool) {
        self.limit.set(f64::from(limit));
        if measured {
            self.latency.set(mean_ns as f64 / 1e9);
        }
    }

    /// One op of `priority` refused by the total.
    #[cold]
    pub(crate) fn refused(&self, priority: Priority) {
        if let Some(counter) = self.refused.get(priority.index()) {
            counter.increment(1);
        }
    }
}
