//! The one place that chooses between `std` and loom.
//!
//! Every other module imports its atomics, `Arc` and hints from here, so a model-checked build
//! (`RUSTFLAGS="--cfg admit_loom"`, driven by the `loom-tests` crate) swaps the whole crate onto
//! loom's instrumented types without any `cfg` leaking elsewhere. The cfg is namespaced so that
//! turning it on does not also flip other crates that read a plain `cfg(loom)`.

#[cfg(not(admit_loom))]
pub(crate) use std::sync::Arc;

#[cfg(admit_loom)]
pub(crate) use loom::sync::Arc;

/// Atomic integers and orderings. `AtomicU32` holds the `quota` counters (an epoch stamp and a
/// count per word); `AtomicU64` the token buckets and clocks.
pub(crate) mod atomic {
    #[cfg(not(admit_loom))]
    pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    #[cfg(admit_loom)]
    pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
}

/// Tell the scheduler (or loom) that this thread is waiting on another one.
///
/// Only test harnesses and the drain in `fairness` use it: no decision path ever waits.
#[allow(dead_code)]
pub(crate) fn yield_now() {
    #[cfg(not(admit_loom))]
    std::thread::yield_now();
    #[cfg(admit_loom)]
    loom::thread::yield_now();
}
