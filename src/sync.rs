//! The one place that chooses between `std` and loom.
//!
//! Every other module imports its atomics, `Arc` and hints from here, so a model-checked build
//! (`RUSTFLAGS="--cfg admit_loom"`, driven by the `loom-tests` crate) swaps the whole crate onto
//! loom's instrumented types without any `cfg` leaking elsewhere. The cfg is namespaced so that
//! turning it on does not also flip other crates that read a plain `cfg(loom)`.
//!
//! A third choice, `RUSTFLAGS="--cfg admit_writes"`, keeps `std`'s atomics but wraps each in a
//! type that notes the cache line (address / 64) of every write it makes, on the calling
//! thread: a store, a swap, every read-modify-write and every compare-exchange attempt,
//! successful or not (a failed CAS still takes its line exclusive). Loads note nothing. The
//! decision-writes test (`check::writes`) reads those notes through `sync::writes` to check which
//! lines one decision writes. The wrappers forward to `std` with the caller's orderings, so the
//! protocols are unchanged; only the bookkeeping is added.

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
    #[cfg(not(any(admit_loom, admit_writes)))]
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    };

    #[cfg(all(admit_writes, not(admit_loom)))]
    pub(crate) use super::writes::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
    #[cfg(all(admit_writes, not(admit_loom)))]
    pub(crate) use std::sync::atomic::{fence, Ordering};

    #[cfg(admit_loom)]
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    };
}

/// The write-recording atomics of `--cfg admit_writes` and the per-thread record they fill.
#[cfg(all(admit_writes, not(admit_loom)))]
pub(crate) mod writes {
    use std::cell::RefCell;
    use std::collections::BTreeSet;
    use std::sync::atomic::Ordering;

    /// A cache line's number: its address divided by the line size.
    pub(crate) type Line = usize;

    /// The line size assumed: 64 bytes, x86-64's and most ARM cores'.
    pub(crate) const LINE_BYTES: usize = 64;

    std::thread_local! {
        /// The lines written on this thread since `start`; `None` when not recording.
        static RECORD: RefCell<Option<BTreeSet<Line>>> = const { RefCell::new(None) };
    }

    /// Starts (or restarts) recording this thread's writes, forgetting any recorded before.
    #[cfg(test)]
    pub(crate) fn start() {
        RECORD.with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                *r = Some(BTreeSet::new());
            }
        });
    }

    /// Stops recording and returns the distinct lines written on this thread since `start`.
    #[cfg(test)]
    pub(crate) fn lines() -> BTreeSet<Line> {
        RECORD.with(|r| {
            r.try_borrow_mut()
                .ok()
                .and_then(|mut r| r.take())
                .unwrap_or_default()
        })
    }

    /// The line holding `what`'s first byte.
    pub(crate) fn line_of<T: ?Sized>(what: &T) -> Line {
        std::ptr::from_ref(what).cast::<u8>() as usize / LINE_BYTES
    }

    /// Every line `what` touches, first byte to last.
    #[cfg(test)]
    pub(crate) fn lines_of<T>(what: &T) -> std::ops::RangeInclusive<Line> {
        let first = std::ptr::from_ref(what).cast::<u8>() as usize;
        let last = first + std::mem::size_of::<T>().max(1) - 1;
        first / LINE_BYTES..=last / LINE_BYTES
    }

    fn note<T: ?Sized>(what: &T) {
        // `try_with`: a write from a thread-local destructor after this one's is gone notes
        // nothing rather than failing.
        let _ = RECORD.try_with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                if let Some(set) = r.as_mut() {
                    set.insert(line_of(what));
                }
            }
        });
    }

    /// The methods every atomic has; `$extra` adds the integer ones.
    macro_rules! recording_atomic {
        ($name:ident, $std:ident, $t:ty, { $($extra:item)* }) => {
            /// `std`'s atomic of the same name, noting each write's line (see `start`).
            #[derive(Default)]
            #[repr(transparent)]
            pub(crate) struct $name(std::sync::atomic::$std);

            impl std::fmt::Debug for $name {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    std::fmt::Debug::fmt(&self.0, f)
                }
            }

            impl From<$t> for $name {
                fn from(v: $t) -> Self {
                    Self::new(v)
                }
            }

            // Each method forwards with the caller's orderings: they are the caller's to justify.
            #[allow(dead_code)]
            impl $name {
                pub(crate) const fn new(v: $t) -> Self {
                    Self(std::sync::atomic::$std::new(v))
                }
                pub(crate) fn load(&self, order: Ordering) -> $t {
                    self.0.load(order)
                }
                pub(crate) fn store(&self, v: $t, order: Ordering) {
                    note(self);
                    self.0.store(v, order)
                }
                pub(crate) fn swap(&self, v: $t, order: Ordering) -> $t {
                    note(self);
                    self.0.swap(v, order)
                }
                pub(crate) fn compare_exchange(
                    &self,
                    current: $t,
                    new: $t,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$t, $t> {
                    note(self);
                    self.0.compare_exchange(current, new, success, failure)
                }
                pub(crate) fn compare_exchange_weak(
                    &self,
                    current: $t,
                    new: $t,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$t, $t> {
                    note(self);
                    self.0.compare_exchange_weak(current, new, success, failure)
                }
                /// As `std`'s: each attempt is a CAS (and noted), none when `f` declines.
                pub(crate) fn fetch_update<F: FnMut($t) -> Option<$t>>(
                    &self,
                    set_order: Ordering,
                    fetch_order: Ordering,
                    mut f: F,
                ) -> Result<$t, $t> {
                    // `fetch_order` for the first load and every failed attempt, `set_order`
                    // for the one that lands: the caller's orderings, as `std` applies them.
                    let mut prev = self.0.load(fetch_order);
                    while let Some(next) = f(prev) {
                        match self.compare_exchange_weak(prev, next, set_order, fetch_order) {
                            Ok(seen) => return Ok(seen),
                            Err(seen) => prev = seen,
                        }
                    }
                    Err(prev)
                }
                pub(crate) fn fetch_and(&self, v: $t, order: Ordering) -> $t {
                    note(self);
                    self.0.fetch_and(v, order)
                }
                pub(crate) fn fetch_or(&self, v: $t, order: Ordering) -> $t {
                    note(self);
                    self.0.fetch_or(v, order)
                }
                pub(crate) fn fetch_xor(&self, v: $t, order: Ordering) -> $t {
                    note(self);
                    self.0.fetch_xor(v, order)
                }
                pub(crate) fn get_mut(&mut self) -> &mut $t {
                    self.0.get_mut()
                }
                pub(crate) fn into_inner(self) -> $t {
                    self.0.into_inner()
                }
                /// The `std` atomic inside, for a futex wait or wake (which write nothing).
                pub(crate) fn as_std(&self) -> &std::sync::atomic::$std {
                    &self.0
                }
                $($extra)*
            }
        };
    }

    macro_rules! recording_integer {
        ($name:ident, $t:ty) => {
            recording_atomic!($name, $name, $t, {
                pub(crate) fn fetch_add(&self, v: $t, order: Ordering) -> $t {
                    note(self);
                    self.0.fetch_add(v, order)
                }
                pub(crate) fn fetch_sub(&self, v: $t, order: Ordering) -> $t {
                    note(self);
                    self.0.fetch_sub(v, order)
                }
                pub(crate) fn fetch_max(&self, v: $t, order: Ordering) -> $t {
                    note(self);
                    self.0.fetch_max(v, order)
                }
                pub(crate) fn fetch_min(&self, v: $t, order: Ordering) -> $t {
                    note(self);
                    self.0.fetch_min(v, order)
                }
            });
        };
    }

    recording_integer!(AtomicU64, u64);
    recording_integer!(AtomicU32, u32);
    recording_integer!(AtomicUsize, usize);
    recording_atomic!(AtomicBool, AtomicBool, bool, {});
}

/// Blocks until `atom` might no longer hold `expected` (a futex wait; spurious returns allowed).
/// Under loom, a yield: the model checker explores the wake-up as a re-check.
pub(crate) fn wait(atom: &atomic::AtomicU32, expected: u32) {
    #[cfg(not(any(admit_loom, admit_writes)))]
    atomic_wait::wait(atom, expected);
    #[cfg(all(admit_writes, not(admit_loom)))]
    atomic_wait::wait(atom.as_std(), expected);
    #[cfg(admit_loom)]
    {
        let _ = (atom, expected);
        loom::thread::yield_now();
    }
}

/// Wakes every thread blocked in [`wait`] on `atom`.
pub(crate) fn wake_all(atom: &atomic::AtomicU32) {
    #[cfg(not(any(admit_loom, admit_writes)))]
    atomic_wait::wake_all(atom);
    #[cfg(all(admit_writes, not(admit_loom)))]
    atomic_wait::wake_all(atom.as_std());
    #[cfg(admit_loom)]
    let _ = atom;
}
