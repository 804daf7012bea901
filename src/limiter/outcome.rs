//! What a charge answers: granted, limited (with the wait), or a request that is wrong.

use crate::bucket::Empty;
use crate::clock::ReadingAhead;
use std::fmt;
use std::time::Duration;

/// A granted charge.
///
/// ```
/// use admit::{BucketConfig, Limiter};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?])?;
/// let grant = limiter.try_acquire("alice", 0)?;
/// assert_eq!(grant.class(), 0);
/// assert!(!grant.via_overflow(), "alice got an entry of her own");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A grant is neither `Copy` nor `Clone`: [`Limiter::refund_at`](crate::Limiter::refund_at)
/// consumes it, so it is given back at most once; and it names the limiter and the key it was
/// charged under, so it gives back only there (see "Refunds" in the
/// [bucket docs](crate::bucket#refunds)).
///
/// ```compile_fail,E0382
/// use admit::{BucketConfig, Limiter};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_second(10).unwrap()]).unwrap();
/// let grant = limiter.try_acquire("alice", 0).unwrap();
/// let _ = limiter.refund(grant, 1);
/// let _ = limiter.refund(grant, 1); // error[E0382]: use of moved value: `grant`
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Grant {
    pub(crate) class: usize,
    pub(crate) overflow: bool,
    pub(crate) would_refuse: Option<Limited>,
    /// What a refund of this grant needs to undo it exactly (see
    /// [`Limiter::refund_at`](crate::Limiter::refund_at)).
    pub(crate) receipt: Receipt,
    /// The id of the limiter that granted it.
    pub(crate) limiter: u64,
    /// The table's 64 bits for the key charged (the identity and class), from which a refund
    /// finds the entry again: the identity is never asked twice.
    pub(crate) key: u64,
}

/// What a take left behind: the class word it was decided under, the state it wrote (the
/// entry's `full_at`, or the overflow bucket's word), and how many tokens it took (0: it took
/// nothing, and a refund gives nothing back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Receipt {
    pub(crate) stamp: super::era::Stamp,
    pub(crate) left: u64,
    pub(crate) n: u32,
}

impl Receipt {
    /// The receipt of a grant that took nothing.
    pub(crate) fn nothing(stamp: super::era::Stamp) -> Self {
        Self {
            stamp,
            left: 0,
            n: 0,
        }
    }
}

impl Grant {
    /// The grant of a charge of 0 tokens: nothing to pay, so nothing inserted (an entry is only
    /// ever born charged), and nothing to give back.
    pub(crate) fn of_nothing(class: usize, stamp: super::era::Stamp, limiter: u64) -> Self {
        Self {
            class,
            overflow: false,
            would_refuse: None,
            receipt: Receipt::nothing(stamp),
            limiter,
            key: 0,
        }
    }

    /// The grant of a check, which took nothing (a charge of 0, or a limit charged by
    /// outcome): nothing to give back, and the `full_at` the check read in its receipt, which
    /// is what [`Limiter::left_of`](super::Limiter::left_of) reports of it.
    pub(crate) fn of_a_check(
        class: usize,
        stamp: super::era::Stamp,
        limiter: u64,
        would_refuse: Option<Limited>,
        full_at: u64,
    ) -> Self {
        let mut grant = Self::of_nothing(class, stamp, limiter);
        grant.would_refuse = would_refuse;
        grant.receipt.left = full_at;
        grant
    }

    /// How many tokens the charge took (0 for a shadow admission, or a charge of 0).
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?])?;
    /// assert_eq!(limiter.try_acquire_n("alice", 0, 3)?.tokens(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokens(&self) -> u32 {
        self.receipt.n
    }

    /// The class charged.
    pub fn class(&self) -> usize {
        self.class
    }

    /// Whether the class's shared overflow bucket paid (the table was saturated), rather than
    /// the identity's own entry.
    pub fn via_overflow(&self) -> bool {
        self.overflow
    }

    /// The refusal this admission stands for, if the class is in [shadow mode](crate::shadow)
    /// and enforcement would have refused: nothing was charged, exactly as for a refusal, and
    /// a refund of this grant gives nothing back.
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter, ManualClock};
    ///
    /// let limiter = Limiter::builder().build_with_clock([BucketConfig::per_second(1)?], ManualClock::new())?;
    /// limiter.set_shadow(0, true)?;
    /// assert!(limiter.try_acquire("alice", 0)?.would_have_refused().is_none());
    /// let grant = limiter.try_acquire("alice", 0)?; // admitted: the class is in shadow mode
    /// assert_eq!(grant.would_have_refused().unwrap().retry_after_secs(), 1);
    /// assert_eq!(limiter.shadow_admissions(0), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn would_have_refused(&self) -> Option<&Limited> {
        self.would_refuse.as_ref()
    }
}

/// A charge refused for want of tokens.
///
/// ```
/// use admit::{BucketConfig, Limiter, ManualClock};
/// use std::time::Duration;
///
/// let limiter = Limiter::builder()
///     .build_with_clock([BucketConfig::per_second(1)?], ManualClock::new())?;
/// limiter.try_acquire("alice", 0)?;
/// let refused = limiter.try_acquire("alice", 0).unwrap_err();
/// let limited = refused.limited().unwrap();
/// assert_eq!(limited.wait(), Duration::from_secs(1));
/// assert_eq!(limited.retry_after_secs(), 1);
/// assert!(!limited.via_overflow());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub(crate) class: usize,
    pub(crate) overflow: bool,
    pub(crate) empty: Empty,
}

/// What a limiter refusal event reports (see `crate::trace`).
#[cfg(feature = "tracing")]
impl crate::trace::RateRefusal for Limited {
    fn class(&self) -> usize {
        self.class
    }

    fn wait(&self) -> Duration {
        self.empty.wait()
    }

    fn via_overflow(&self) -> bool {
        self.overflow
    }
}

impl Limited {
    /// The class whose bucket had no token.
    pub fn class(&self) -> usize {
        self.class
    }

    /// Whether the bucket that refused was the class's shared overflow bucket.
    pub fn via_overflow(&self) -> bool {
        self.overflow
    }

    /// The exact time until that bucket holds enough tokens (absent other charges).
    pub fn wait(&self) -> Duration {
        self.empty.wait()
    }

    /// [`Limited::wait`] rounded up to whole seconds, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        self.empty.retry_after_secs()
    }
}

impl fmt::Display for Limited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let which = if self.overflow {
            "the shared overflow bucket (the entry table is full of drained entries)"
        } else {
            "its bucket"
        };
        write!(
            f,
            "rate limited: class {} has no token in {which}; {}",
            self.class, self.empty
        )
    }
}

impl std::error::Error for Limited {}

/// A charge that can never succeed as asked, whatever the buckets hold.
///
/// ```
/// use admit::limiter::{InvalidCharge, LimiterRefused};
/// use admit::{BucketConfig, Limiter};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_second(5)?])?;
/// let err = limiter.try_acquire("alice", 3).unwrap_err();
/// assert!(matches!(err, LimiterRefused::Invalid(InvalidCharge::UnknownClass { .. })));
/// let err = limiter.try_acquire_n("alice", 0, 6).unwrap_err();
/// assert!(matches!(err, LimiterRefused::Invalid(InvalidCharge::ExceedsBurst { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidCharge {
    /// The class index is not one of the limiter's classes.
    UnknownClass {
        /// The index asked for.
        class: usize,
        /// How many classes the limiter has (valid indexes are `0..classes`).
        classes: usize,
    },
    /// More tokens were asked for than the class's burst.
    ExceedsBurst {
        /// The class charged.
        class: usize,
        /// Tokens asked for.
        requested: u32,
        /// The class's burst.
        burst: u32,
    },
    /// The reading handed to an `_at` method lies ahead of the limiter's own clock by more
    /// than [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS), or, for a moment,
    /// ahead of the instant a change being published is counted at
    /// ([`ReadingAhead::while_a_change_lands`]: no fault of the caller's, ask again): nothing
    /// was charged.
    ReadingAhead(ReadingAhead),
}

impl fmt::Display for InvalidCharge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownClass { class, classes } => write!(
                f,
                "class {class} does not exist: this limiter has {classes} classes (0..{classes})"
            ),
            Self::ExceedsBurst {
                class,
                requested,
                burst,
            } => write!(
                f,
                "asked for {requested} tokens of class {class}, whose burst is {burst}: this \
                 charge can never succeed; split it or raise the class's burst"
            ),
            Self::ReadingAhead(ahead) => ahead.fmt(f),
        }
    }
}

impl std::error::Error for InvalidCharge {}

impl From<ReadingAhead> for InvalidCharge {
    fn from(ahead: ReadingAhead) -> Self {
        Self::ReadingAhead(ahead)
    }
}

impl From<ReadingAhead> for LimiterRefused {
    fn from(ahead: ReadingAhead) -> Self {
        Self::Invalid(InvalidCharge::ReadingAhead(ahead))
    }
}

/// Why a charge was not granted.
///
/// ```
/// use admit::{BucketConfig, Limiter, LimiterRefused};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_minute(1)?])?;
/// limiter.try_acquire("alice", 0)?;
/// match limiter.try_acquire("alice", 0) {
///     Err(LimiterRefused::Limited(limited)) => {
///         // HTTP: 429 with `Retry-After: {limited.retry_after_secs()}`.
///         assert_eq!(limited.retry_after_secs(), 60);
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimiterRefused {
    /// No token now; [`Limited::wait`] says when.
    Limited(Limited),
    /// The charge can never succeed as asked.
    Invalid(InvalidCharge),
}

impl LimiterRefused {
    /// The limited answer, if that is what this is.
    pub fn limited(&self) -> Option<&Limited> {
        match self {
            Self::Limited(limited) => Some(limited),
            Self::Invalid(_) => None,
        }
    }

    /// Whether nothing was decided only because a limit change was being published at an
    /// earlier reading (see [`ReadingAhead::while_a_change_lands`]): ask again.
    pub fn while_a_change_lands(&self) -> bool {
        matches!(self, Self::Invalid(InvalidCharge::ReadingAhead(ahead)) if ahead.while_a_change_lands())
    }
}

impl fmt::Display for LimiterRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limited(limited) => limited.fmt(f),
            Self::Invalid(invalid) => invalid.fmt(f),
        }
    }
}

impl std::error::Error for LimiterRefused {}

impl From<InvalidCharge> for LimiterRefused {
    fn from(invalid: InvalidCharge) -> Self {
        Self::Invalid(invalid)
    }
}

/// What a charge would see, without consuming anything.
///
/// ```
/// use admit::{BucketConfig, Clock, Limiter};
/// use std::time::Duration;
///
/// let limiter = Limiter::builder().build([BucketConfig::per_second(2)?])?;
/// let now = limiter.clock().now_ns();
/// limiter.try_acquire_n_at("alice", 0, 2, now)?;
/// let peek = limiter.peek_at("alice", 0, 1, now)?;
/// assert_eq!(peek.available(), 0);
/// assert_eq!(peek.wait(), Duration::from_millis(500) - Duration::from_nanos(now % 1_000_000));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    pub(crate) available: u32,
    pub(crate) wait: Duration,
    pub(crate) overflow: bool,
}

impl Peek {
    /// Whole tokens in the bucket a charge would land on.
    pub fn available(&self) -> u32 {
        self.available
    }

    /// Time until the peeked number of tokens is available there (zero if now).
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Whether a charge would land on the class's overflow bucket.
    pub fn via_overflow(&self) -> bool {
        self.overflow
    }
}
