//! The drain: waiting until no op is in flight, and the wake of the release that ends it.

use super::{count_of, Quotas, Shared};
use crate::sync;
use crate::sync::atomic::{fence, Ordering};

impl Quotas {
    /// Blocks the calling thread until no op is in flight, woken by the release that brings the
    /// last count to zero (no busy loop; a release wakes only when someone is waiting). For
    /// shutdown: stop submitting first, or new ops keep it waiting. Never call it from a
    /// submitter.
    ///
    /// ```
    /// use admit::fairness::Quotas;
    ///
    /// let quotas = Quotas::new();
    /// let permit = quotas.try_acquire_owned("last op")?;
    /// let writer = std::thread::spawn(move || permit.complete());
    /// quotas.wait_idle(); // returns once the writer has decided the last op
    /// writer.join().unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_idle(&self) {
        let shared = &*self.shared;
        // SeqCst, then the fence below: either our scan sees a release's zero, or that
        // release sees us waiting and wakes us (see "Orderings").
        shared.waiters.fetch_add(1, Ordering::SeqCst);
        loop {
            // Acquire: pairs with the Release of a waking release's bump, so a bump we read
            // comes with the count it announced.
            let epoch = shared.epoch.load(Ordering::Acquire);
            fence(Ordering::SeqCst);
            if shared.is_idle() {
                break;
            }
            // Sleeps until a release bumps the epoch (or returns at once if it already did).
            sync::wait(&shared.epoch, epoch);
        }
        // Relaxed: only the release path reads it, and a stale non-zero costs one spare wake.
        shared.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shared {
    /// A count reached zero: if a drain is waiting, tell it to look again.
    #[cold]
    pub(super) fn wake_drain(&self) {
        // SeqCst fence, pairing with the drain's: either the drain's scan sees our zero, or we
        // see its registration here (see "Orderings").
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Release: a drain that reads the new epoch also sees the zero that caused it.
        self.epoch.fetch_add(1, Ordering::Release);
        sync::wake_all(&self.epoch);
    }

    /// Whether nothing is in flight: every entry at zero and both counters at zero.
    fn is_idle(&self) -> bool {
        // Relaxed loads after the drain's SeqCst fence (see "Orderings").
        self.overflow.load(Ordering::Relaxed) == 0
            && self.unlimited.load(Ordering::Relaxed) == 0
            && !self.table.any_member(|value| count_of(value) > 0)
    }
}
