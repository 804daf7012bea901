//! The caller's verbs: a small closed set, each owning two limiter classes.
//!
//! The profile is generic over the verb layer's own verb type, so the limiter's classes are
//! verb × bucket: `class = verb.index() × 2 + bucket.index()`, four per identity for a
//! registrar with two verbs.

use std::fmt;

/// A verb of the caller's verb layer.
///
/// # Contract
///
/// [`Verb::ALL`] lists every value of the type exactly once, each at the position its
/// [`Verb::index`] returns. [`RegistrarLimiter`](super::RegistrarLimiter) checks this for
/// the listed values when it is built and refuses a set that breaks it. A value missing from
/// `ALL` cannot be checked in advance; if one reaches a check point the profile fails closed
/// (see [`RegistrarLimiter::enter_admission_at`](super::RegistrarLimiter::enter_admission_at)),
/// never admitting it unlimited.
///
/// ```
/// use admit::registrar::Verb;
///
/// #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// enum Op {
///     Mint,
///     Retire,
/// }
///
/// impl Verb for Op {
///     const ALL: &'static [Self] = &[Op::Mint, Op::Retire];
///
///     fn index(self) -> usize {
///         self as usize
///     }
///
///     fn name(self) -> &'static str {
///         match self {
///             Op::Mint => "mint",
///             Op::Retire => "retire",
///         }
///     }
/// }
/// ```
pub trait Verb: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// Every verb, each at the position its [`Verb::index`] returns.
    const ALL: &'static [Self];

    /// This verb's position in [`Verb::ALL`].
    fn index(self) -> usize;

    /// A short stable name, for logs and error messages.
    fn name(self) -> &'static str;
}

/// Why a verb set breaks the [`Verb`] contract.
///
/// ```
/// use admit::registrar::{NoopSink, RegistrarBuildError, RegistrarConfig, RegistrarLimiter, Verb, VerbSetError};
///
/// #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// enum Op { Mint, Retire }
///
/// impl Verb for Op {
///     const ALL: &'static [Self] = &[Op::Mint, Op::Retire];
///     fn index(self) -> usize { 0 } // wrong: Retire must say 1
///     fn name(self) -> &'static str { "op" }
/// }
///
/// let err = RegistrarLimiter::<Op>::builder(RegistrarConfig::default()).build(NoopSink).unwrap_err();
/// assert!(matches!(err, RegistrarBuildError::Verbs(VerbSetError::IndexMismatch { position: 1, .. })));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerbSetError {
    /// `Verb::ALL` is empty: there would be nothing to charge.
    Empty,
    /// The verb at `position` in `Verb::ALL` reports another index.
    IndexMismatch {
        /// Where the verb sits in `Verb::ALL`.
        position: usize,
        /// Its name.
        name: &'static str,
        /// What its `index()` returned.
        index: usize,
    },
}

impl fmt::Display for VerbSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("the verb type lists no verb in `Verb::ALL`"),
            Self::IndexMismatch {
                position,
                name,
                index,
            } => write!(
                f,
                "verb `{name}` sits at position {position} of `Verb::ALL` but its `index()` \
                 returns {index}; each verb's index must be its position"
            ),
        }
    }
}

impl std::error::Error for VerbSetError {}

/// Checks the [`Verb`] contract over `V::ALL`.
pub(super) fn check_verb_set<V: Verb>() -> Result<(), VerbSetError> {
    if V::ALL.is_empty() {
        return Err(VerbSetError::Empty);
    }
    for (position, verb) in V::ALL.iter().enumerate() {
        if verb.index() != position {
            return Err(VerbSetError::IndexMismatch {
                position,
                name: verb.name(),
                index: verb.index(),
            });
        }
    }
    Ok(())
}

/// The position of `verb` in `V::ALL`, if the contract holds for it.
pub(super) fn position<V: Verb>(verb: V) -> Option<usize> {
    let index = verb.index();
    (V::ALL.get(index) == Some(&verb)).then_some(index)
}
