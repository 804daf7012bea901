//! The instruments behind [`crate::metrics`] (feature `metrics`): the labels, and the handles
//! each primitive registers when it is built. The public face, its documentation and the
//! registrar's sink are gathered in [`crate::metrics`], which sits above both this module and
//! the registrar, so neither imports the other's upward.

mod handles;
#[cfg(test)]
mod tests;

pub(crate) use handles::{InFlightMetrics, LimiterMetrics, Outcomes, REGISTRAR_LIMITED};

use ::metrics::{Label, SharedString};

/// The labels every metric of one instance carries, so that two limiters (say) in one process
/// are told apart: `Labels::new().with("limiter", "login")`.
///
/// Handed to an instance when it is made (see "Attaching" in the [module
/// documentation](crate::metrics)); the instance copies them into its pre-registered handles and keeps
/// nothing else. No labels at all is fine for a process with one instance of each primitive.
///
/// ```
/// use admit::metrics::Labels;
/// use admit::quota::{Quota, RateLimit};
///
/// let labels = Labels::new().with("service", "uploads").with("tier", String::from("free"));
/// assert_eq!(labels.len(), 2);
/// let volume = RateLimit::new(Quota::default()).with_metrics(&labels);
/// assert!(volume.try_acquire("session-1", 512).is_ok());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    pub(crate) labels: Vec<Label>,
}

impl Labels {
    /// No labels.
    pub fn new() -> Self {
        Self::default()
    }

    /// These labels and `key = value`. A `&'static str` is kept without a copy. The keys
    /// `class`, `outcome`, `verb` and `bucket` are the crate's own (see "Names").
    pub fn with(mut self, key: impl Into<SharedString>, value: impl Into<SharedString>) -> Self {
        self.labels.push(Label::new(key, value));
        self
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// A copy of these labels with the crate's own `key = value` added.
    pub(crate) fn and(&self, key: &'static str, value: impl Into<SharedString>) -> Self {
        self.clone().with(key, value)
    }
}
