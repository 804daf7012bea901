//! What a refused write says: which limit, how much is used, and when the window turns.

use crate::bucket::retry_after_secs;
use std::fmt;
use std::time::Duration;

/// Which of the two limits of a [`Quota`](super::Quota) refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaLimit {
    /// Writes per window.
    Events,
    /// Bytes per window.
    Bytes,
}

impl QuotaLimit {
    fn unit(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::Bytes => "bytes",
        }
    }
}

impl fmt::Display for QuotaLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.unit())
    }
}

/// A write refused by [`RateLimit`](super::RateLimit): the actor's bucket is over one limit
/// for the current window, or the write alone exceeds a whole window's limit.
///
/// A refusal charges nothing (up to the race slack described in [`crate::quota`]), so the
/// caller may retry once [`QuotaExceeded::window_turns_in`] has passed, when the write is
/// counted in a fresh window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuotaExceeded {
    limit: QuotaLimit,
    max: u32,
    used: u32,
    requested: u64,
    window: Duration,
    turns_in: Duration,
}

impl QuotaExceeded {
    pub(crate) fn new(
        limit: QuotaLimit,
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
    pub fn limit(&self) -> QuotaLimit {
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

    /// [`QuotaExceeded::retry_after`] rounded up to whole seconds, at least 1, for a
    /// `Retry-After` header.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after().map(retry_after_secs)
    }
}

impl fmt::Display for QuotaExceeded {
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

impl std::error::Error for QuotaExceeded {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_limit_the_numbers_and_the_turn() {
        let e = QuotaExceeded::new(
            QuotaLimit::Bytes,
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
        let e = QuotaExceeded::new(
            QuotaLimit::Bytes,
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
    fn events_read_as_events() {
        let e = QuotaExceeded::new(
            QuotaLimit::Events,
            1_200,
            1_200,
            1,
            Duration::from_secs(60),
            Duration::from_nanos(1),
        );
        assert!(e.to_string().starts_with("events quota reached"));
        assert_eq!(e.retry_after_secs(), Some(1));
        assert_eq!(QuotaLimit::Events.to_string(), "events");
    }
}
