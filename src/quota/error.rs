//! What a refused write says: which limit, how much is used, and when the window turns; or
//! that the reading it was checked at is ahead of the limiter's clock.

use crate::bucket::retry_after_secs;
use crate::clock::ReadingAhead;
use std::fmt;
use std::time::Duration;

/// Which of the two limits of a [`Quota`](super::Quota) refused a write.
///
/// ```
/// use admit::quota::{Quota, RateLimit, VolumeLimit};
/// use std::time::Duration;
///
/// let limit = RateLimit::new(Quota::new(10, 100, Duration::from_secs(60))?);
/// let refused = limit.try_acquire("session-1", 101).unwrap_err();
/// assert_eq!(refused.limit(), VolumeLimit::Bytes);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VolumeLimit {
    /// Writes per window.
    Events,
    /// Bytes per window.
    Bytes,
}

impl VolumeLimit {
    fn unit(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::Bytes => "bytes",
        }
    }
}

impl fmt::Display for VolumeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.unit())
    }
}

/// A write refused by [`RateLimit`](super::RateLimit): the actor's bucket is over one limit
/// for the current window, or the write alone exceeds a whole window's limit.
///
/// A refusal charges nothing (up to the race slack described in [`crate::quota`]), so the
/// caller may retry once [`VolumeExceeded::window_turns_in`] has passed, when the write is
/// counted in a fresh window.
///
/// ```
/// use admit::quota::{Quota, RateLimit, VolumeLimit};
/// use std::time::Duration;
///
/// let limit = RateLimit::new(Quota::new(1, 1_024, Duration::from_secs(60))?);
/// limit.try_acquire("session-1", 10)?;
/// let refused = limit.try_acquire("session-1", 10).unwrap_err();
/// assert_eq!((refused.limit(), refused.max(), refused.used()), (VolumeLimit::Events, 1, 1));
/// assert!(refused.retry_after_secs().is_some_and(|s| (1..=60).contains(&s)));
/// println!("{refused}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VolumeExceeded {
    limit: VolumeLimit,
    max: u32,
    used: u32,
    requested: u64,
    window: Duration,
    turns_in: Duration,
}

#[cfg(feature = "tracing")]
impl crate::trace::VolumeRefusal for VolumeExceeded {
    fn limit_name(&self) -> &'static str {
        self.limit.unit()
    }

    fn max(&self) -> u32 {
        self.max
    }

    fn used(&self) -> u32 {
        self.used
    }

    fn window_turns_in(&self) -> Duration {
        self.turns_in
    }

    fn is_permanent(&self) -> bool {
        VolumeExceeded::is_permanent(self)
    }
}

impl VolumeExceeded {
    pub(crate) fn new(
        limit: VolumeLimit,
        max: u32,
        used: u32,
        requested: u64,
        window: Duration,
        turns_in: Duration,
    ) -> Self {
        Self {
            limit,
            max,
            used,
            requested,
            window,
            turns_in,
        }
    }

    /// The limit that refused the write. Events are checked before bytes, except that a write
    /// larger than the whole bytes limit is reported as such first.
    pub fn limit(&self) -> VolumeLimit {
        self.limit
    }

    /// That limit's value: events or bytes per window.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// What this actor's bucket had already counted against that limit in the current window.
    /// The bucket may be shared with other actors (see [`crate::quota`]), so this is an upper
    /// estimate of what the actor itself wrote.
    pub fn used(&self) -> u32 {
        self.used
    }

    /// What the write asked for: 1 event, or its size in bytes.
    pub fn requested(&self) -> u64 {
        self.requested
    }

    /// The window the limit is counted over.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Time until the current window turns, measured from the reading the write was checked
    /// at. Never zero. From that instant the write is counted in a fresh window.
    pub fn window_turns_in(&self) -> Duration {
        self.turns_in
    }

    /// Whether the write alone exceeds a whole window's limit, so that no amount of waiting
    /// admits it.
    pub fn is_permanent(&self) -> bool {
        self.requested > u64::from(self.max)
    }

    /// How long to wait before retrying, or `None` if the write can never be admitted.
    pub fn retry_after(&self) -> Option<Duration> {
        (!self.is_permanent()).then_some(self.turns_in)
    }

    /// [`VolumeExceeded::retry_after`] rounded up to whole seconds, at least 1, for a
    /// `Retry-After` header.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after().map(retry_after_secs)
    }
}

impl fmt::Display for VolumeExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = self.limit.unit();
        if self.is_permanent() {
            return write!(
                f,
                "write refused: it alone is {} {unit}, more than the whole {unit} quota of {} \
                 per {:?} window, so no window can admit it; split the write or raise the \
                 quota's `{unit}`",
                self.requested, self.max, self.window
            );
        }
        write!(
            f,
            "{unit} quota reached: this actor's bucket has used {} of {} {unit} in the current \
             {:?} window and the write needs {} more; the window turns in {:?} (retry after {} s)",
            self.used,
            self.max,
            self.window,
            self.requested,
            self.turns_in,
            retry_after_secs(self.turns_in)
        )
    }
}

impl std::error::Error for VolumeExceeded {}

/// Why [`RateLimit::try_acquire_at`](super::RateLimit::try_acquire_at) refused a write: the actor is over
/// its quota, or the reading handed in is ahead of the limiter's own clock.
///
/// Either way nothing was counted and no shared state moved. The two call for different
/// actions: [`RateLimitRefused::Exceeded`] is the actor's (wait, or write less);
/// [`RateLimitRefused::ReadingAhead`] is the caller's (hand `try_acquire_at` a reading taken from
/// [`RateLimit::clock`](super::RateLimit::clock)), and no wait makes that reading acceptable
/// sooner than the clock reaches it.
///
/// ```
/// use admit::quota::{Quota, RateLimit, RateLimitRefused};
/// use admit::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::starting_at(1_000_000_000);
/// let limit = RateLimit::with_clock(Quota::new(1, 1_024, Duration::from_secs(60))?, clock.clone());
/// let now = clock.now_ns();
/// limit.try_acquire_at("a", 1, now)?;
/// assert!(matches!(limit.try_acquire_at("a", 1, now), Err(RateLimitRefused::Exceeded(_))));
/// // A reading from the future (a bug in the caller) is refused and charges nothing.
/// assert!(matches!(limit.try_acquire_at("b", 1, u64::MAX), Err(RateLimitRefused::ReadingAhead(_))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateLimitRefused {
    /// The actor's buckets are over a limit in the current window, or the write alone exceeds
    /// a whole window's limit.
    Exceeded(VolumeExceeded),
    /// The reading is more than [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS)
    /// ahead of the limiter's clock: a bug in the caller, refused before anything is read or
    /// written, so that it cannot move the window every other actor is counted in.
    ReadingAhead(ReadingAhead),
}

impl RateLimitRefused {
    /// The quota refusal, if the write was refused for being over a limit.
    pub fn exceeded(&self) -> Option<&VolumeExceeded> {
        match self {
            Self::Exceeded(e) => Some(e),
            Self::ReadingAhead(_) => None,
        }
    }

    /// The refused reading, if the write was refused for its reading.
    pub fn reading_ahead(&self) -> Option<&ReadingAhead> {
        match self {
            Self::Exceeded(_) => None,
            Self::ReadingAhead(e) => Some(e),
        }
    }

    /// [`VolumeExceeded::retry_after`] for a quota refusal; `None` for a permanent one and for
    /// a reading ahead, which waiting does not fix (the caller's reading is wrong).
    pub fn retry_after(&self) -> Option<Duration> {
        self.exceeded().and_then(VolumeExceeded::retry_after)
    }

    /// [`RateLimitRefused::retry_after`] in whole seconds, at least 1, for a `Retry-After` header.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after().map(retry_after_secs)
    }
}

impl From<VolumeExceeded> for RateLimitRefused {
    fn from(e: VolumeExceeded) -> Self {
        Self::Exceeded(e)
    }
}

impl From<ReadingAhead> for RateLimitRefused {
    fn from(e: ReadingAhead) -> Self {
        Self::ReadingAhead(e)
    }
}

impl fmt::Display for RateLimitRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exceeded(e) => e.fmt(f),
            Self::ReadingAhead(e) => write!(f, "volume quota check refused: {e}"),
        }
    }
}

impl std::error::Error for RateLimitRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Exceeded(e) => Some(e),
            Self::ReadingAhead(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_limit_the_numbers_and_the_turn() {
        let e = VolumeExceeded::new(
            VolumeLimit::Bytes,
            8 << 20,
            8_000_000,
            500_000,
            Duration::from_secs(60),
            Duration::from_millis(12_300),
        );
        let text = e.to_string();
        for needle in [
            "bytes quota",
            "8000000 of 8388608 bytes",
            "60s",
            "12.3s",
            "retry after 13 s",
        ] {
            assert!(text.contains(needle), "{text:?} lacks {needle:?}");
        }
        assert!(!e.is_permanent());
        assert_eq!(e.retry_after(), Some(Duration::from_millis(12_300)));
        assert_eq!(e.retry_after_secs(), Some(13));
    }

    #[test]
    fn a_write_larger_than_the_limit_says_waiting_cannot_help() {
        let e = VolumeExceeded::new(
            VolumeLimit::Bytes,
            1_000,
            0,
            1_001,
            Duration::from_secs(60),
            Duration::from_secs(5),
        );
        assert!(e.is_permanent());
        assert_eq!(e.retry_after(), None);
        assert_eq!(e.retry_after_secs(), None);
        let text = e.to_string();
        assert!(text.contains("no window can admit it"), "{text}");
        assert!(text.contains("`bytes`"), "{text}");
    }

    #[test]
    fn a_refusal_is_one_of_two_kinds_each_saying_what_to_do() {
        fn is_static_error<E: std::error::Error + Clone + Send + Sync + 'static>() {}
        is_static_error::<RateLimitRefused>();
        let exceeded = VolumeExceeded::new(
            VolumeLimit::Events,
            5,
            5,
            1,
            Duration::from_secs(60),
            Duration::from_millis(1_500),
        );
        let r = RateLimitRefused::from(exceeded);
        assert_eq!(r.exceeded(), Some(&exceeded));
        assert_eq!(r.reading_ahead(), None);
        assert_eq!(r.retry_after_secs(), Some(2));
        assert_eq!(r.to_string(), exceeded.to_string());
        let clock = crate::clock::ManualClock::starting_at(7);
        let ahead = crate::clock::Horizon::new()
            .admit(u64::MAX, &clock)
            .unwrap_err();
        let r = RateLimitRefused::from(ahead);
        assert_eq!(r.reading_ahead(), Some(&ahead));
        assert_eq!(
            r.retry_after(),
            None,
            "waiting does not fix a wrong reading"
        );
        let text = r.to_string();
        for needle in [
            "volume quota",
            "18446744073709551615 ns",
            "clock().now_ns()",
        ] {
            assert!(text.contains(needle), "{text:?} lacks {needle:?}");
        }
        assert!(std::error::Error::source(&r).is_some());
    }

    #[test]
    fn events_read_as_events() {
        let e = VolumeExceeded::new(
            VolumeLimit::Events,
            1_200,
            1_200,
            1,
            Duration::from_secs(60),
            Duration::from_nanos(1),
        );
        assert!(e.to_string().starts_with("events quota reached"));
        assert_eq!(e.retry_after_secs(), Some(1));
        assert_eq!(VolumeLimit::Events.to_string(), "events");
    }
}
