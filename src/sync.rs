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

/// A mutex, for configuration paths only: no decision ever takes one.
#[cfg(not(admit_loom))]
pub(crate) use std::sync::Mutex;

#[cfg(admit_loom)]
pub(crate) use loom::sync::Mutex;

/// Atomic integers, fences and orderings.
pub(crate) mod atomic {
    #[cfg(not(admit_loom))]
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    };

    #[cfg(admit_loom)]
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    };
}

/// Blocks until `atom` might no longer hold `expected` (a futex wait; spurious returns allowed).
/// Under loom, a yield: the model checker explores the wake-up as a re-check.
pub(crate) fn wait(atom: &atomic::AtomicU32, expected: u32) {
    #[cfg(not(admit_loom))]
    atomic_wait::wait(atom, expected);
    #[cfg(admit_loom)]
    {
        let _ = (atom, expected);
        loom::thread::yield_now();
    }
}

/// Wakes every thread blocked in [`wait`] on `atom`.
pub(crate) fn wake_all(atom: &atomic::AtomicU32) {
    #[cfg(not(admit_loom))]
    atomic_wait::wake_all(atom);
    #[cfg(admit_loom)]
    let _ = atom;
}
