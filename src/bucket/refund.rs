//! Refunds: a grant names the take it stands for and the bucket it came from, and a refund
//! undoes exactly that take, or nothing.
//!
//! The rules are in the [bucket docs](super), "Refunds".

use super::{versions, TokenBucket};
use crate::sync::atomic::Ordering;
use std::fmt;

/// What a refund gave back.
///
/// ```
/// use admit::{BucketConfig, Refunded, TokenBucket};
///
/// let bucket = TokenBucket::new(BucketConfig::per_second(10)?);
/// let first = bucket.try_acquire_refundable_n_at(2, 0)?;
/// let second = bucket.try_acquire_refundable_n_at(1, 0)?;
/// // The first take is no longer the last thing that happened to the bucket.
/// assert_eq!(bucket.refund(first, 2), Refunded::Void);
/// assert_eq!(bucket.refund(second, 1), Refunded::Exact { tokens: 1 });
/// assert_eq!(bucket.available_at(0), 8, "the first take's two tokens stay spent");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a refund may give nothing back: match on what it says if the caller needs to know"]
pub enum Refunded {
    /// The bucket is exactly as if the take had not happened, less what was not refunded:
    /// `tokens` were given back.
    Exact {
        /// Tokens given back: the refund's `n`, at most what the grant took.
        tokens: u32,
    },
    /// Something landed on the bucket since the take (another take, a refund, a change of
    /// limits, or a reclaim of the entry): the token may already have refilled and been taken
    /// again, so nothing was given back.
    Void,
    /// The grant took nothing (a shadow admission, or a take of 0), or the refund asked for 0
    /// tokens: nothing to give back.
    Nothing,
    /// The grant came from another bucket or limiter: nothing was given back here.
    OtherInstance,
}

impl Refunded {
    /// Tokens given back (0 unless [`Refunded::Exact`]).
    ///
    /// ```
    /// use admit::Refunded;
    ///
    /// assert_eq!(Refunded::Exact { tokens: 3 }.tokens(), 3);
    /// assert_eq!(Refunded::Void.tokens(), 0);
    /// ```
    pub fn tokens(&self) -> u32 {
        match self {
            Self::Exact { tokens } => *tokens,
            Self::Void | Self::Nothing | Self::OtherInstance => 0,
        }
    }
}

impl fmt::Display for Refunded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact { tokens } => write!(f, "{tokens} tokens given back"),
            Self::Void => f.write_str(
                "nothing given back: the bucket changed since the take (another take, a refund, \
                 a change of limits or a reclaim landed), so the token may already have been \
                 granted again",
            ),
            Self::Nothing => f.write_str("nothing given back: the grant took nothing"),
            Self::OtherInstance => f.write_str(
                "nothing given back: the grant came from another bucket or limiter; refund it \
                 where it was taken",
            ),
        }
    }
}

/// What a [`TokenBucket`] take granted, to give back with [`TokenBucket::refund`]: the bucket
/// it came from, the state the take left the bucket in, and how many tokens it took.
///
/// ```
/// use admit::{BucketConfig, TokenBucket};
///
/// let bucket = TokenBucket::new(BucketConfig::per_second(10)?);
/// let grant = bucket.try_acquire_refundable_n_at(4, 0)?;
/// assert_eq!(grant.tokens(), 4);
/// assert_eq!(bucket.refund(grant, 4).tokens(), 4);
/// assert_eq!(bucket.available_at(0), 10);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It is neither `Copy` nor `Clone`: [`TokenBucket::refund`] consumes it, so a grant is given
/// back at most once, and it carries the bucket's id, so it gives back only where it was taken
/// (see "Refunds" in the [bucket docs](crate::bucket#refunds)):
///
/// ```compile_fail,E0382
/// use admit::{BucketConfig, TokenBucket};
///
/// let bucket = TokenBucket::new(BucketConfig::per_second(1).unwrap());
/// let grant = bucket.try_acquire_refundable_n_at(1, 0).unwrap();
/// let _ = bucket.refund(grant, 1);
/// let _ = bucket.refund(grant, 1); // error[E0382]: use of moved value: `grant`
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct BucketGrant {
    /// The id of the bucket that granted it.
    bucket: u32,
    /// The state word the take's CAS wrote.
    word: u64,
    /// The tokens it took.
    n: u32,
}

impl BucketGrant {
    /// A grant of `bucket` whose take wrote `word` and took `n` tokens.
    pub(super) fn new(bucket: u32, word: u64, n: u32) -> Self {
        Self { bucket, word, n }
    }

    /// A grant that took nothing (`n = 0`, or a shadow admission): a refund gives nothing.
    pub(super) fn nothing(bucket: u32) -> Self {
        Self::new(bucket, 0, 0)
    }

    /// How many tokens the take took (0 for a shadow admission).
    pub fn tokens(&self) -> u32 {
        self.n
    }
}

impl TokenBucket {
    /// Gives back up to `n` of the tokens `grant` took (for work that was admitted but will
    /// not be done), if nothing has changed the bucket since that take: then the bucket is
    /// exactly as if the take had never happened, and the answer is [`Refunded::Exact`].
    /// Otherwise nothing is given back, and the answer says why (see "Refunds" in the
    /// [module documentation](crate::bucket#refunds)).
    ///
    /// Once another take, a refund or a change has landed, the token the grant took may
    /// already have come back into a full bucket and been taken again, so a refund then would
    /// grant it twice (burst 1 per 10 ms: a take at 0, a take at 10 ms, a refund of the first
    /// and a third take at 10 ms would be two grants at one reading). A grant is given back
    /// once (the refund consumes it) and only on the bucket that granted it.
    ///
    /// ```
    /// use admit::{BucketConfig, Refunded, TokenBucket};
    ///
    /// let bucket = TokenBucket::new(BucketConfig::per_second(1)?); // burst 1
    /// let grant = bucket.try_acquire_refundable_n_at(1, 0)?;
    /// // The work was not done: the token is back.
    /// assert_eq!(bucket.refund(grant, 1), Refunded::Exact { tokens: 1 });
    /// let again = bucket.try_acquire_refundable_n_at(1, 0)?;
    /// assert!(bucket.try_acquire_at(1_000_000_000).is_ok(), "the next one a second later");
    /// // Too late: the bucket moved on, nothing is given back.
    /// assert_eq!(bucket.refund(again, 1), Refunded::Void);
    /// assert!(bucket.try_acquire_at(1_000_000_000).is_err());
    ///
    /// // A grant refunds only into the bucket that granted it.
    /// let twin = TokenBucket::new(BucketConfig::per_second(1)?);
    /// let elsewhere = twin.try_acquire_refundable_n_at(1, 0)?;
    /// assert_eq!(bucket.refund(elsewhere, 1), Refunded::OtherInstance);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund(&self, grant: BucketGrant, n: u32) -> Refunded {
        let n = n.min(grant.n);
        if n == 0 {
            return Refunded::Nothing;
        }
        if grant.bucket != self.versions.id() {
            return Refunded::OtherInstance;
        }
        // Acquire: the config slot the word's version names was written before the word.
        let word = self.state.load(Ordering::Acquire);
        if word != grant.word {
            return Refunded::Void;
        }
        let config = self.versions.of(word);
        let full_at = versions::full_at(word);
        let credit = u64::from(n) * config.interval_ticks();
        let next = versions::with_full_at(word, full_at, full_at.saturating_sub(credit));
        // One attempt: a failure means something landed since the take, and the refund is void.
        match self.state.compare_exchange(
            word,
            next,
            // Relaxed: the refund publishes nothing; the word it replaces was acquired.
            Ordering::Relaxed,
            // Relaxed: the refund is void; nothing is read.
            Ordering::Relaxed,
        ) {
            Ok(_) => Refunded::Exact { tokens: n },
            Err(_) => Refunded::Void,
        }
    }
}
