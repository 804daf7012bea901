//! The take path: `try_acquire*`, decided in place on the state word, or under its version.

use super::{gcra, versions, BucketConfig, BucketGrant, BucketRefused, TokenBucket};
use crate::clock::Clock;
use crate::sync::atomic::Ordering;

impl TokenBucket {
    /// Takes one token at the clock's current reading.
    pub fn try_acquire(&self, clock: &impl Clock) -> Result<(), BucketRefused> {
        self.try_acquire_n_at(1, clock.now_ns())
    }

    /// Takes `n` tokens at the clock's current reading, all or nothing.
    pub fn try_acquire_n(&self, clock: &impl Clock, n: u32) -> Result<(), BucketRefused> {
        self.try_acquire_n_at(n, clock.now_ns())
    }

    /// Takes one token at reading `now_ns` (nanoseconds since the clock's origin).
    #[inline]
    pub fn try_acquire_at(&self, now_ns: u64) -> Result<(), BucketRefused> {
        self.try_acquire_n_at(1, now_ns)
    }

    /// Takes `n` tokens at reading `now_ns`, all or nothing. `n == 0` always succeeds.
    #[inline]
    pub fn try_acquire_n_at(&self, n: u32, now_ns: u64) -> Result<(), BucketRefused> {
        self.try_acquire_refundable_n_at(n, now_ns).map(|_| ())
    }

    /// [`TokenBucket::try_acquire_n_at`], answering a grant that [`TokenBucket::refund`] can
    /// give back: for work that may be refused after the tokens are taken.
    ///
    /// ```
    /// use admit::{BucketConfig, TokenBucket};
    ///
    /// let bucket = TokenBucket::new(BucketConfig::per_second(1)?); // burst 1
    /// let grant = bucket.try_acquire_refundable_n_at(1, 0)?;
    /// // A later check refused the work: the token goes back.
    /// bucket.refund(grant, 1);
    /// assert!(bucket.try_acquire_at(0).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_refundable_n_at(
        &self,
        n: u32,
        now_ns: u64,
    ) -> Result<BucketGrant, BucketRefused> {
        let taken = self.take_n_at(n, now_ns);
        // A refusal took nothing; in shadow mode it is counted and admitted (asking for more
        // than the burst is a caller's error, not a decision, and stays an error).
        let shadow = matches!(taken, Err(BucketRefused::Empty(_)))
            && self.shadow.admits_instead_out_of_line();
        // One branch when nothing is attached; see `crate::metrics`, "What a decision costs".
        // Asking for more than the burst is not a decision, and a take of 0 is not counted.
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.metrics.as_deref() {
            match &taken {
                Ok(_) if n > 0 => metrics.record(true, false),
                Err(BucketRefused::Empty(_)) if shadow => metrics.record_would_refuse(),
                Err(BucketRefused::Empty(_)) => metrics.record(false, false),
                Ok(_) | Err(BucketRefused::ExceedsBurst { .. }) => {}
            }
        }
        if shadow {
            return Ok(BucketGrant::nothing(self.versions.id()));
        }
        taken
    }

    #[inline]
    fn take_n_at(&self, n: u32, now_ns: u64) -> Result<BucketGrant, BucketRefused> {
        // The fast path (`versions`, invariant 4): the current config, loaded beside the word.
        let (current, config) = self.versions.current();
        // Acquire: ordered after the current config's acquire load (invariant 4); and a word of
        // another version names a slot written before it (invariant 1).
        let mut word = self.state.load(Ordering::Acquire);
        let tick = config.tick().of(now_ns);
        // Before any CAS below: a refusal's reading counts too, which only makes a later
        // faster change count more debt.
        self.raise_latest(tick);
        let now = current | tick;
        while versions::version_bits(word) == current {
            match gcra::take(&config, word, now, n) {
                Ok(next) if next == word => return Ok(BucketGrant::nothing(self.versions.id())),
                Ok(next) => match self.state.compare_exchange_weak(
                    word,
                    next,
                    // Release: publishes the `latest` raised above to a change that acquires
                    // this word (or a later one of its release sequence).
                    Ordering::Release,
                    // Acquire: the winner may be a change; its config slot must be visible.
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Ok(BucketGrant::new(self.versions.id(), next, n)),
                    Err(actual) => word = actual,
                },
                // Decided: the word carried the version whose config this is when it was
                // loaded (invariant 4).
                Err(refusal) => return Err(refused_in_place(config, refusal, current, n, now_ns)),
            }
        }
        self.take_under_its_version(n, now_ns)
    }

    /// A take whose state word did not carry the current version (a change is under way):
    /// decided under the config the word's own version names.
    #[cold]
    #[inline(never)]
    fn take_under_its_version(&self, n: u32, now_ns: u64) -> Result<BucketGrant, BucketRefused> {
        // Acquire: the config slot this word's version names was written before the word (see
        // `versions`, invariant 1).
        let mut word = self.state.load(Ordering::Acquire);
        // As on the fast path, before any CAS.
        self.raise_latest(self.versions.of(word).tick().of(now_ns));
        loop {
            let config = self.versions.of(word);
            let full_at = versions::full_at(word);
            match gcra::take_at(&config, full_at, n, now_ns) {
                Ok(next) if next == full_at => return Ok(BucketGrant::nothing(self.versions.id())),
                Ok(next) => {
                    let next = versions::with_full_at(word, full_at, next);
                    match self.state.compare_exchange_weak(
                        word,
                        next,
                        // Release: as on the fast path, publishes `latest`.
                        Ordering::Release,
                        // Acquire: the winner may be a change; its config slot must be visible.
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return Ok(BucketGrant::new(self.versions.id(), next, n)),
                        Err(actual) => word = actual,
                    }
                }
                Err(refused) => {
                    // Acquire: after the slot's acquire load; an unchanged word means the
                    // refusal was decided under the config in force (`versions`, invariant 2).
                    let again = self.state.load(Ordering::Acquire);
                    if again == word {
                        return Err(refused);
                    }
                    word = again;
                }
            }
        }
    }

    /// Raises `latest` to `tick` (a take's, before its CAS): one load and a compare on the hit
    /// path, an RMW once per tick.
    #[inline(always)]
    fn raise_latest(&self, tick: u64) {
        // Relaxed, both: published by the take's Release CAS that follows; `fetch_max` never
        // lowers it, so racing takes leave the latest of their ticks.
        if tick > self.latest.load(Ordering::Relaxed) {
            self.latest.fetch_max(tick, Ordering::Relaxed);
        }
    }
}

/// The refusal of a take decided on the fast path, where ticks carry the version bits
/// `version_bits` (see `versions`, invariant 4): the tick a refusal names is stripped of them.
#[inline]
fn refused_in_place(
    config: BucketConfig,
    refusal: gcra::Refusal,
    version_bits: u64,
    n: u32,
    now_ns: u64,
) -> BucketRefused {
    let refusal = match refusal {
        // The ready tick lies after the reading, which carries the same version bits.
        gcra::Refusal::Empty { ready_tick } => gcra::Refusal::Empty {
            ready_tick: ready_tick - version_bits,
        },
        exceeds @ gcra::Refusal::ExceedsBurst => exceeds,
    };
    gcra::refused(&config, refusal, n, now_ns)
}
