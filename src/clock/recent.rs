//! The default clock: the recent time, one relaxed load per reading.
//!
//! Reading [`std::time::Instant`] costs tens of nanoseconds (a vDSO call and a TSC read),
//! about as much as the whole rest of a keyed decision. [`RecentClock`] reads one word instead:
//! the time, in nanoseconds since a process-wide origin, that one background thread (the
//! *updater*, named `admit-clock`) stores every [`RECENT_REFRESH`] from `Instant`. nginx's cached time
//! and `coarsetime::Instant::recent` make the same trade.
//!
//! # Rules
//!
//! 1. **Monotonic, across threads and cores.** Readings come from one atomic word that only
//!    ever grows (every store is a `fetch_max` of a monotonic `Instant` reading). Loads of one
//!    location are coherent: a thread never reads a value older than one it read before, nor
//!    older than one another thread read before a synchronisation that made that read visible
//!    to it. So no decision sees time go back, whatever core it runs on (loom model
//!    `loom-tests/tests/clock.rs`; real-thread test `recent_clock_never_goes_back_across_threads`).
//! 2. **Late, never early.** A reading is a time the updater saw, so it is at most the real
//!    time, and lags it by at most [`RECENT_REFRESH`] plus however long the updater's wake-up is late
//!    (the OS scheduler's business). A late reading is an earlier moment: it can only delay a
//!    token, never mint one (test `recent_time_lags_by_at_most_one_refresh`).
//! 3. **Never frozen for good.** The updater runs while any `RecentClock` is alive and stops
//!    when the last is dropped; a new clock restarts it, and reads the time itself before it
//!    returns, so a clock never hands out a reading staler than the moment it was made. If the
//!    OS refuses the thread, each reading reads `Instant` itself (correct, and as slow as
//!    [`MonotonicClock`](super::MonotonicClock)).
//!
//! # What a user gets
//!
//! Decisions are made in 1 ms ticks ([`TICK_NS`](super::tick)), and the recent time is at most
//! [`RECENT_REFRESH`] (0.5 ms) behind the real one when the updater wakes on time: together, a token
//! becomes available at most 1.5 ms after the exact moment an ideal clock would release it, and
//! a reported wait may be up to 0.5 ms longer than the true one. Over any interval the limiter
//! admits at most `burst + (interval + staleness) × rate`, the bound any clock read a moment
//! before the decision gives. The price is one thread per process, waking 2,000 times a second
//! while a clock is alive. A caller who wants neither uses [`MonotonicClock`](super::MonotonicClock)
//! (`Instant` per reading) through `build_with_clock`/`with_clock`.

use super::{duration_to_ns, Clock};
use crate::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the updater stores the time.
pub const RECENT_REFRESH: Duration = Duration::from_micros(500);

/// The recent time: one word, advanced by an updater, read by everyone.
#[derive(Debug, Default)]
pub(crate) struct RecentTime {
    ns: AtomicU64,
}

impl RecentTime {
    /// The latest time stored.
    #[inline]
    pub(crate) fn read(&self) -> u64 {
        // Relaxed: the word is the only datum; coherence of this one location is what keeps
        // readings monotonic (rule 1), and no other memory is published with it.
        self.ns.load(Ordering::Relaxed)
    }

    /// Stores `source_ns` unless a later time is stored already (two updaters, an old one
    /// finishing its last round while a new one starts, never move it back).
    pub(crate) fn refresh(&self, source_ns: u64) {
        // Relaxed: as in `read`; the RMW orders racing updaters on this one word.
        self.ns.fetch_max(source_ns, Ordering::Relaxed);
    }
}

/// The recent-time word, for the loom model of rule 1. Not part of the supported API.
#[cfg(admit_loom)]
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct LoomRecentTime(RecentTime);

#[cfg(admit_loom)]
impl LoomRecentTime {
    /// A word reading zero.
    pub fn new() -> Self {
        Self::default()
    }
    /// What a reader reads.
    pub fn read(&self) -> u64 {
        self.0.read()
    }
    /// What the updater stores.
    pub fn refresh(&self, source_ns: u64) {
        self.0.refresh(source_ns)
    }
}

/// The default clock: the recent time, read with one relaxed load.
///
/// A background thread (`admit-clock`) stores the time every [`RECENT_REFRESH`] (0.5 ms) by
/// `fetch_max` of an `Instant` reading, while any `RecentClock` is alive. Its rules:
///
/// * **Monotonic across threads and cores**: readings come from one word that only grows.
/// * **Late, never early**: a reading lags the real time by at most [`RECENT_REFRESH`] plus
///   the updater's wake-up delay, so it can only delay a token, never mint one.
/// * **What a user gets**: with 1 ms decision ticks, a token becomes available at most 1.5 ms
///   after an ideal clock would release it; over any interval a limiter admits at most
///   `burst + (interval + staleness) × rate`.
/// * If the OS refuses the thread, each reading reads `Instant` itself (correct and slower,
///   like [`MonotonicClock`](super::MonotonicClock)).
///
/// All `RecentClock`s read one process-wide time, so their readings agree, and a reading
/// taken from one may be handed to any primitive that owns another.
///
/// ```
/// use admit::{BucketConfig, Clock, Limiter, RecentClock};
///
/// let clock = RecentClock::new();
/// let (a, b) = (clock.now_ns(), clock.now_ns());
/// assert!(b >= a, "never goes back");
///
/// // What `Limiter::builder().build(..)` uses when no clock is given.
/// let limiter = Limiter::builder().build([BucketConfig::per_second(100)?])?;
/// let now = limiter.clock().now_ns();
/// assert!(limiter.try_acquire_at("alice", 0, now).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RecentClock {
    /// `None` when the updater could not be started: each reading then reads `Instant`.
    shared: Option<&'static RecentTime>,
}

impl RecentClock {
    /// A clock reading the process-wide recent time, starting the updater if none runs.
    pub fn new() -> Self {
        Self {
            shared: updater::join(),
        }
    }
}

impl Default for RecentClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for RecentClock {
    fn clone(&self) -> Self {
        if self.shared.is_some() {
            updater::rejoin();
        }
        Self {
            shared: self.shared,
        }
    }
}

impl Drop for RecentClock {
    fn drop(&mut self) {
        if self.shared.is_some() {
            updater::leave();
        }
    }
}

impl Clock for RecentClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        match self.shared {
            Some(time) => time.read(),
            None => updater::precise_ns(),
        }
    }
}

/// The updater thread and its lifetime: started by the first live clock, stopped after the
/// last is dropped. A mutex guards only starting and stopping it, never a reading.
mod updater {
    use super::{duration_to_ns, RecentTime};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::OnceLock;
    use std::time::Instant;

    /// The origin of every reading.
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    /// Live clocks.
    static LIVE: AtomicUsize = AtomicUsize::new(0);

    /// Nanoseconds since the process-wide origin, read from `Instant` now.
    pub(super) fn precise_ns() -> u64 {
        duration_to_ns(ORIGIN.get_or_init(Instant::now).elapsed())
    }

    /// Under loom and miri no updater runs (their models and tests read a `ManualClock` or
    /// take readings as given; the word's protocol has its own loom model over
    /// `LoomRecentTime`, and a thread left sleeping at exit would be a leak to miri): each
    /// reading reads `Instant`.
    #[cfg(any(admit_loom, miri))]
    pub(super) fn join() -> Option<&'static RecentTime> {
        None
    }

    /// Registers a new clock; returns the time to read, or `None` if no updater could run.
    #[cfg(not(any(admit_loom, miri)))]
    pub(super) fn join() -> Option<&'static RecentTime> {
        let time = live::time();
        // Relaxed: the count is read back only under `RUNNING`'s lock (see `run`), which
        // orders it with the updater's last look.
        LIVE.fetch_add(1, Ordering::Relaxed);
        // The new clock's first reading is fresh, whatever the updater is doing.
        time.refresh(precise_ns());
        if live::ensure_running() {
            Some(time)
        } else {
            leave();
            None
        }
    }

    /// Registers a clone of a live clock (the updater runs already).
    pub(super) fn rejoin() {
        // Relaxed: see `join`.
        LIVE.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn leave() {
        // Relaxed: see `join`.
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }

    /// The word and its thread (not under loom, whose atomics live only inside a model, nor
    /// under miri).
    #[cfg(not(any(admit_loom, miri)))]
    pub(super) mod live {
        use super::super::{RecentTime, RECENT_REFRESH};
        use super::{precise_ns, LIVE};
        use std::sync::atomic::Ordering;
        use std::sync::{Mutex, OnceLock, PoisonError};

        static TIME: OnceLock<RecentTime> = OnceLock::new();
        /// Whether an updater runs; changed only under this lock.
        static RUNNING: Mutex<bool> = Mutex::new(false);

        pub(in super::super) fn time() -> &'static RecentTime {
            TIME.get_or_init(RecentTime::default)
        }

        /// Starts the updater unless one runs; false if the OS refused the thread.
        pub(in super::super) fn ensure_running() -> bool {
            let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            if !*running {
                let spawned = std::thread::Builder::new()
                    .name("admit-clock".into())
                    .spawn(run);
                if spawned.is_err() {
                    return false;
                }
                *running = true;
            }
            true
        }

        /// The updater: stores the time every `RECENT_REFRESH` while any clock lives. It decides to
        /// stop only under the lock a new clock takes to start one, so a clock made while it
        /// stops either sees it running (and it sees the clock, and keeps running) or starts
        /// another.
        fn run() {
            let time = time();
            loop {
                time.refresh(precise_ns());
                std::thread::sleep(RECENT_REFRESH);
                // Relaxed: a quick look; the decision to stop is re-made under the lock.
                if LIVE.load(Ordering::Relaxed) == 0 {
                    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
                    // Relaxed: the lock orders this load after any `join` that took it before.
                    if LIVE.load(Ordering::Relaxed) == 0 {
                        *running = false;
                        return;
                    }
                }
            }
        }

        #[cfg(test)]
        pub(in super::super) fn is_running() -> bool {
            *RUNNING.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::atomic::AtomicU64 as StdAtomicU64;

    #[test]
    fn recent_time_lags_by_at_most_one_refresh() {
        // A manual updater: the source moves in steps smaller than a refresh, the updater
        // stores it once per refresh. Every reading is at most the source (never early) and
        // at least the source minus one refresh (the staleness bound).
        let source = ManualClock::new();
        let time = RecentTime::default();
        let refresh = duration_to_ns(RECENT_REFRESH);
        let step = refresh / 7 + 1;
        let mut next_refresh = 0;
        for _ in 0..10_000 {
            if source.now_ns() >= next_refresh {
                time.refresh(source.now_ns());
                next_refresh += refresh;
            }
            let (reading, real) = (time.read(), source.now_ns());
            assert!(
                reading <= real,
                "a reading ahead of the source: {reading} > {real}"
            );
            assert!(
                real - reading <= refresh,
                "staler than one refresh: {real} - {reading}"
            );
            source.advance_ns(step);
        }
    }

    #[test]
    fn an_older_refresh_never_moves_the_time_back() {
        let time = RecentTime::default();
        time.refresh(500);
        time.refresh(300);
        assert_eq!(time.read(), 500);
    }

    #[test]
    #[cfg_attr(miri, ignore = "real threads and sleeps")]
    fn recent_clock_never_goes_back_across_threads() {
        // Each thread reads the highest reading any thread has published, then the clock: the
        // publication happens-before the reading, so by coherence the reading is not older.
        let clock = RecentClock::new();
        let highest = StdAtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut mine = 0;
                    for _ in 0..200_000 {
                        let seen = highest.load(std::sync::atomic::Ordering::Acquire);
                        let now = clock.now_ns();
                        assert!(now >= seen, "time went back across threads");
                        assert!(now >= mine, "time went back on one thread");
                        mine = now;
                        highest.fetch_max(now, std::sync::atomic::Ordering::AcqRel);
                    }
                });
            }
        });
        assert!(highest.into_inner() > 0, "the clock moved");
    }

    #[test]
    #[cfg(not(miri))] // no updater runs under miri
    fn the_updater_advances_the_time() {
        let clock = RecentClock::new();
        assert!(updater::live::is_running());
        let first = clock.now_ns();
        // Not a timing assertion: waits (bounded) until the updater has stored a later time.
        let mut moved = false;
        for _ in 0..2_000 {
            std::thread::sleep(RECENT_REFRESH);
            if clock.now_ns() > first {
                moved = true;
                break;
            }
        }
        assert!(moved, "the updater never advanced the time");
        let precise = updater::precise_ns();
        assert!(clock.now_ns() <= precise, "a reading ahead of Instant");
    }
}
