//! The limits and the window they are counted over, validated against the word's bit budget.

use super::word::MAX_COUNT;
use super::BUCKETS;
use std::fmt;
use std::time::Duration;

/// How much one actor may write per window: `events` writes and `bytes` bytes, whichever runs
/// out first, over fixed windows of length `window`, counted in `rows` hash rows.
///
/// Every field is validated once, at construction, against the bit budget of a counter word
/// (see [`crate::quota`]): a limit is at most [`Quota::MAX_EVENTS`] / [`Quota::MAX_BYTES`]
/// (2^24 − 1) per window. A larger volume is expressed over a shorter window, not a bigger
/// count: 16 MiB per minute is 1 MiB every 3.75 s.
///
/// # The default
///
/// [`Quota::default`] is **1,200 events and 8 MiB per 60-second window, in 4 rows**. Each
/// number is twice what one heavy legitimate session needs, because two actors that land in
/// the same buckets share one budget:
///
/// * **60 s window.** Long enough to absorb a human- or script-sized burst (a paste of a few
///   hundred events) without refusing it; short enough that a refused actor is told to wait at
///   most a minute, and that an abusive one is held to a steady rate rather than a daily cap
///   it spends in one go.
/// * **1,200 events.** A busy scripted session sustains a few events per second; ten per second
///   (600 a minute) is already heavy. Two such sessions sharing a bucket still fit.
/// * **8 MiB.** 4 MiB a minute each for two sharers: a 1 MiB attachment every 15 s, or 600
///   events of 7 KiB, per actor. Half the field's range, so an operator can double it without
///   changing the window.
/// * **4 rows.** An innocent actor is refused only if all four of its buckets are full. At
///   equal memory, with a thousand actors at their limit at once, that happens to about 1
///   innocent actor in 70,000 (one row: 1 in 66; two rows: 1 in 1,100); four rows stay the best
///   choice up to about 15,000 actors at their limit, more than a single writer can feed at
///   these limits (the table and the argument are in `docs/design.md` §5).
///
/// What the default bounds, per actor: 1,200 events and 8 MiB per counted window, so a minute's
/// worth in the long run (about 1.7 million events, 11 GiB a day); when readings never go back,
/// at most twice that in any 60-second span of readings that straddles a window boundary
/// (with lagging readings, spans of readings bound nothing: see "The window rule" in
/// [`crate::quota`]). Generous by design; tighten it where actors are known.
///
/// ```
/// use admit::quota::{Quota, RateLimit};
/// use std::time::Duration;
///
/// // 100 writes and 64 KiB per actor per minute, counted in four hashed rows.
/// let quota = Quota::new(100, 64 * 1024, Duration::from_secs(60))?.with_rows(4)?;
/// assert_eq!((quota.events(), quota.bytes(), quota.rows()), (100, 65_536, 4));
/// let limit = RateLimit::new(quota);
/// assert!(limit.try_acquire("session-1", 1_000).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    events: u32,
    bytes: u32,
    window_ns: u64,
    rows: u32,
}

/// Why a [`Quota`] was refused. Each variant names the field to change.
///
/// ```
/// use admit::quota::{Quota, RateLimitConfigError};
/// use std::time::Duration;
///
/// let err = Quota::new(0, 1_024, Duration::from_secs(60)).unwrap_err();
/// assert_eq!(err, RateLimitConfigError::ZeroEvents);
/// println!("{err}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimitConfigError {
    /// `events` was 0: every write would be refused.
    ZeroEvents,
    /// `events` exceeds [`Quota::MAX_EVENTS`].
    EventsOutOfRange {
        /// The limit asked for.
        events: u32,
    },
    /// `bytes` was 0: every write that carries a byte would be refused.
    ZeroBytes,
    /// `bytes` exceeds [`Quota::MAX_BYTES`].
    BytesOutOfRange {
        /// The limit asked for.
        bytes: u32,
    },
    /// `window` is shorter than [`Quota::MIN_WINDOW`] (zero included).
    WindowTooShort {
        /// The window asked for.
        window: Duration,
    },
    /// `window` is longer than [`Quota::MAX_WINDOW`].
    WindowTooLong {
        /// The window asked for.
        window: Duration,
    },
    /// `rows` was 0: an actor would have no counter at all.
    ZeroRows,
    /// `rows` is not a power of two, so [`BUCKETS`] cannot be split evenly between rows.
    RowsNotPowerOfTwo {
        /// The row count asked for.
        rows: usize,
    },
    /// `rows` exceeds [`Quota::MAX_ROWS`].
    TooManyRows {
        /// The row count asked for.
        rows: usize,
    },
    /// [`RateLimit::set_limits`](super::RateLimit::set_limits) asked for another window length
    /// than the limiter was built with. Windows are numbered in that length (every counter is
    /// stamped with its window's number), so a new length would renumber them: the current
    /// window's counts would be read as another window's. Build a new `RateLimit` instead.
    WindowFixed {
        /// The window asked for.
        window: Duration,
        /// The window the limiter was built with.
        built_with: Duration,
    },
    /// [`RateLimit::set_limits`](super::RateLimit::set_limits) asked for another row count
    /// than the limiter was built with: rows are how its fixed array is split, and every
    /// actor's counters would move. Build a new `RateLimit` instead.
    RowsFixed {
        /// The row count asked for.
        rows: usize,
        /// The row count the limiter was built with.
        built_with: usize,
    },
}

impl fmt::Display for RateLimitConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroEvents => f.write_str(
                "quota `events` is 0: every write would be refused; use at least 1 \
                 (Quota::default() allows 1200 per minute)",
            ),
            Self::EventsOutOfRange { events } => write!(
                f,
                "quota `events` is {events}, above the {} a counter can hold per window; \
                 lower it, or shorten `window` so that the same rate needs fewer events per window",
                Quota::MAX_EVENTS
            ),
            Self::ZeroBytes => f.write_str(
                "quota `bytes` is 0: every write carrying a byte would be refused; use at least 1 \
                 (Quota::default() allows 8 MiB per minute)",
            ),
            Self::BytesOutOfRange { bytes } => write!(
                f,
                "quota `bytes` is {bytes}, above the {} (16 MiB - 1) a counter can hold per \
                 window; lower it, or shorten `window` so that the same rate needs fewer bytes \
                 per window",
                Quota::MAX_BYTES
            ),
            Self::WindowTooShort { window } => write!(
                f,
                "quota `window` is {window:?}, shorter than the minimum {:?}; for sub-millisecond \
                 rates use a token bucket (admit::TokenBucket) instead",
                Quota::MIN_WINDOW
            ),
            Self::WindowTooLong { window } => write!(
                f,
                "quota `window` is {window:?}, longer than the maximum {:?} (366 days); a longer \
                 window is a lifetime cap that a restart resets anyway; use at most 366 days",
                Quota::MAX_WINDOW
            ),
            Self::ZeroRows => {
                f.write_str("quota `rows` is 0: an actor needs at least one counter; use 1, 2 or 4")
            }
            Self::RowsNotPowerOfTwo { rows } => write!(
                f,
                "quota `rows` is {rows}, not a power of two, so the {BUCKETS} buckets cannot be \
                 split evenly between rows; use 1, 2 or 4"
            ),
            Self::TooManyRows { rows } => write!(
                f,
                "quota `rows` is {rows}, above the maximum {}: one 64-bit hash yields at most {} \
                 independent bucket indexes over {BUCKETS} buckets; use 1, 2 or 4",
                Quota::MAX_ROWS,
                Quota::MAX_ROWS
            ),
            Self::WindowFixed { window, built_with } => write!(
                f,
                "quota `window` cannot change at runtime from {built_with:?} to {window:?}: \
                 windows are numbered in the length the limiter was built with, and a new length \
                 would read the current window's counts as another window's; keep {built_with:?} \
                 (change `events` and `bytes` only), or build a new limiter"
            ),
            Self::RowsFixed { rows, built_with } => write!(
                f,
                "quota `rows` cannot change at runtime from {built_with} to {rows}: the rows split \
                 the limiter's fixed counter array, and every actor's counters would move; keep \
                 {built_with}, or build a new limiter"
            ),
        }
    }
}

impl std::error::Error for RateLimitConfigError {}

const NS_PER_MS: u64 = 1_000_000;
const DEFAULT_EVENTS: u32 = 1_200;
const DEFAULT_BYTES: u32 = 8 << 20;
const DEFAULT_WINDOW_NS: u64 = 60 * 1_000 * NS_PER_MS;

impl Quota {
    /// The largest `events` limit: 2^24 − 1, the range of a counter word.
    pub const MAX_EVENTS: u32 = MAX_COUNT;
    /// The largest `bytes` limit: 2^24 − 1 (16 MiB − 1), the range of a counter word.
    pub const MAX_BYTES: u32 = MAX_COUNT;
    /// The shortest window: one millisecond. Shorter than that a quota is a rate limiter, and
    /// [`TokenBucket`](crate::TokenBucket) is the better tool.
    pub const MIN_WINDOW: Duration = Duration::from_millis(1);
    /// The longest window: 366 days.
    pub const MAX_WINDOW: Duration = Duration::from_secs(366 * 24 * 60 * 60);
    /// The most hash rows: 4. Each row takes `log2(BUCKETS / rows)` bits of one 64-bit SipHash,
    /// and 4 rows of 2^14 buckets use 56 of them; 8 rows would need 104.
    pub const MAX_ROWS: usize = 4;
    /// The default number of rows: 4 (see the collision table in `docs/design.md` §5).
    pub const DEFAULT_ROWS: usize = 4;

    /// The default quota: see [the type's documentation](Quota#the-default).
    pub const DEFAULT: Quota = Quota {
        events: DEFAULT_EVENTS,
        bytes: DEFAULT_BYTES,
        window_ns: DEFAULT_WINDOW_NS,
        rows: Self::DEFAULT_ROWS as u32,
    };

    /// Validates and builds a quota of `events` writes and `bytes` bytes per `window`, in
    /// [`Quota::DEFAULT_ROWS`] rows.
    pub fn new(events: u32, bytes: u32, window: Duration) -> Result<Self, RateLimitConfigError> {
        if events == 0 {
            return Err(RateLimitConfigError::ZeroEvents);
        }
        if events > Self::MAX_EVENTS {
            return Err(RateLimitConfigError::EventsOutOfRange { events });
        }
        if bytes == 0 {
            return Err(RateLimitConfigError::ZeroBytes);
        }
        if bytes > Self::MAX_BYTES {
            return Err(RateLimitConfigError::BytesOutOfRange { bytes });
        }
        if window < Self::MIN_WINDOW {
            return Err(RateLimitConfigError::WindowTooShort { window });
        }
        if window > Self::MAX_WINDOW {
            return Err(RateLimitConfigError::WindowTooLong { window });
        }
        let window_ns = crate::clock::duration_to_ns(window);
        Ok(Self {
            events,
            bytes,
            window_ns,
            rows: Self::DEFAULT.rows,
        })
    }

    /// The same quota counted in `rows` hash rows (1, 2 or 4), which split the [`BUCKETS`]
    /// counters between them: memory does not change with `rows`.
    pub fn with_rows(self, rows: usize) -> Result<Self, RateLimitConfigError> {
        if rows == 0 {
            return Err(RateLimitConfigError::ZeroRows);
        }
        if rows > Self::MAX_ROWS {
            return Err(RateLimitConfigError::TooManyRows { rows });
        }
        if !rows.is_power_of_two() {
            return Err(RateLimitConfigError::RowsNotPowerOfTwo { rows });
        }
        let rows = u32::try_from(rows).map_err(|_| RateLimitConfigError::TooManyRows { rows })?;
        Ok(Self { rows, ..self })
    }

    /// Writes allowed per window.
    pub fn events(&self) -> u32 {
        self.events
    }

    /// Bytes allowed per window.
    pub fn bytes(&self) -> u32 {
        self.bytes
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window_ns)
    }

    /// Hash rows the counters are split into.
    pub fn rows(&self) -> usize {
        self.rows as usize
    }

    /// The window in nanoseconds; at least [`Quota::MIN_WINDOW`], so never zero.
    pub(crate) fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// This quota with the limits `events` and `bytes`, taken as valid (they come from a
    /// validated quota, packed by `RateLimit::set_limits`).
    #[inline]
    pub(crate) fn with_limits(self, events: u32, bytes: u32) -> Self {
        Self {
            events,
            bytes,
            ..self
        }
    }
}

impl Default for Quota {
    /// 1,200 events and 8 MiB per 60-second window, in 4 rows: see
    /// [the type's documentation](Quota#the-default) for why.
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_valid_quota_with_the_documented_numbers() {
        let d = Quota::default();
        assert_eq!(d.events(), 1_200);
        assert_eq!(d.bytes(), 8 * 1024 * 1024);
        assert_eq!(d.window(), Duration::from_secs(60));
        assert_eq!(d.rows(), 4);
        let rebuilt = Quota::new(d.events(), d.bytes(), d.window())
            .and_then(|q| q.with_rows(d.rows()))
            .unwrap();
        assert_eq!(rebuilt, d);
    }

    #[test]
    fn limits_are_validated_against_the_word_and_name_their_field() {
        let w = Duration::from_secs(1);
        assert_eq!(Quota::new(0, 1, w), Err(RateLimitConfigError::ZeroEvents));
        assert_eq!(Quota::new(1, 0, w), Err(RateLimitConfigError::ZeroBytes));
        assert!(Quota::new(Quota::MAX_EVENTS, Quota::MAX_BYTES, w).is_ok());
        let e = Quota::new(Quota::MAX_EVENTS + 1, 1, w).unwrap_err();
        assert_eq!(
            e,
            RateLimitConfigError::EventsOutOfRange { events: 1 << 24 }
        );
        assert!(e.to_string().contains("`events`"));
        let e = Quota::new(1, u32::MAX, w).unwrap_err();
        assert_eq!(e, RateLimitConfigError::BytesOutOfRange { bytes: u32::MAX });
        assert!(e.to_string().contains("`bytes`"));
        assert!(RateLimitConfigError::ZeroEvents
            .to_string()
            .contains("`events`"));
        assert!(RateLimitConfigError::ZeroBytes
            .to_string()
            .contains("`bytes`"));
    }

    #[test]
    fn the_window_is_bounded_on_both_sides() {
        assert!(matches!(
            Quota::new(1, 1, Duration::ZERO),
            Err(RateLimitConfigError::WindowTooShort { .. })
        ));
        let short = Quota::new(1, 1, Duration::from_micros(999)).unwrap_err();
        assert!(short.to_string().contains("`window`"));
        assert!(Quota::new(1, 1, Quota::MIN_WINDOW).is_ok());
        assert!(Quota::new(1, 1, Quota::MAX_WINDOW).is_ok());
        let long = Quota::new(1, 1, Quota::MAX_WINDOW + Duration::from_nanos(1)).unwrap_err();
        assert!(matches!(long, RateLimitConfigError::WindowTooLong { .. }));
        assert!(long.to_string().contains("`window`"));
        assert!(Quota::new(1, 1, Duration::MAX).is_err());
    }

    #[test]
    fn rows_are_one_two_or_four() {
        let q = Quota::new(1, 1, Duration::from_secs(1)).unwrap();
        for rows in [1, 2, 4] {
            assert_eq!(q.with_rows(rows).unwrap().rows(), rows);
        }
        assert_eq!(q.with_rows(0), Err(RateLimitConfigError::ZeroRows));
        assert_eq!(
            q.with_rows(3),
            Err(RateLimitConfigError::RowsNotPowerOfTwo { rows: 3 })
        );
        assert_eq!(
            q.with_rows(8),
            Err(RateLimitConfigError::TooManyRows { rows: 8 })
        );
        assert_eq!(
            q.with_rows(usize::MAX),
            Err(RateLimitConfigError::TooManyRows { rows: usize::MAX })
        );
        for e in [
            RateLimitConfigError::ZeroRows,
            RateLimitConfigError::RowsNotPowerOfTwo { rows: 3 },
            RateLimitConfigError::TooManyRows { rows: 8 },
        ] {
            assert!(e.to_string().contains("`rows`"), "{e}");
        }
    }
}
