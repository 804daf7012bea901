//! The registrar's typed outcome surface: [`RegistrarError`] and [`RetryAfter`].

use std::fmt;
use std::num::NonZeroU64;
use std::time::Duration;

/// What a registrar verb invocation that did not succeed tells its caller.
///
/// Every variant but [`RegistrarError::RegistrarBusy`] is permanent: the same request will
/// be refused the same way until something outside it changes (the request itself, the
/// deployment's specification, or an operator's action). Match on the variant, never on the
/// message.
///
/// # The throttle
///
/// Retryability is a property of the variant, not a flag on one: [`is_retryable`] is true
/// for [`RegistrarError::RegistrarBusy`] alone. The throttle means the outcome is
/// undetermined and a later attempt may succeed, which is true at the admission check point
/// and false on the pre-derivation arm, where the request is invalid on its face and always
/// will be. So the throttle is produced only at admission, and it never replaces an outcome
/// the daemon has already determined: reporting a permanent refusal as retryable would make a
/// broken caller retry a request that can never succeed, and that retry storm is itself a
/// flood.
///
/// [`is_retryable`]: RegistrarError::is_retryable
///
/// ```
/// use admit::registrar::{RegistrarError, RetryAfter};
///
/// let busy = RegistrarError::RegistrarBusy { retry_after: RetryAfter::from_secs(2).unwrap() };
/// assert!(busy.is_retryable());
/// assert_eq!(busy.retry_after().map(|r| r.secs()), Some(2));
/// assert!(!RegistrarError::NameCollision.is_retryable(), "a permanent refusal");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegistrarError {
    /// The request is malformed: refused on the pre-derivation arm before any backend work.
    /// Permanent: sending it again sends the same request.
    ServiceInstanceMismatch {
        /// What is wrong with it.
        cause: MismatchCause,
    },
    /// The request conflicts with the specification already registered for that service.
    SpecConflict,
    /// The derived name is already held by another instance.
    NameCollision,
    /// The request names a host that the caller is not.
    HostMismatch,
    /// The registrar cannot serve anyone until an operator acts.
    RegistrarUnavailable {
        /// Why.
        reason: UnavailableReason,
    },
    /// The admission bucket had no token: the request was not attempted, nothing was
    /// recorded, and the same request may succeed after `retry_after`. The only retryable
    /// variant.
    RegistrarBusy {
        /// How long to wait before retrying.
        retry_after: RetryAfter,
    },
}

/// Why a request was refused on the pre-derivation arm.
///
/// ```
/// use admit::registrar::{MismatchCause, RegistrarError};
///
/// let refusal = RegistrarError::ServiceInstanceMismatch { cause: MismatchCause::HostNotDnsLabel };
/// assert!(!refusal.is_retryable());
/// println!("{refusal}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MismatchCause {
    /// `service_name` is not a DNS label.
    ServiceNameNotDnsLabel,
    /// `host` is not a DNS label.
    HostNotDnsLabel,
    /// The component has no multiplicity entry.
    NoMultiplicityEntry,
}

/// Why the registrar is unavailable until an operator acts.
///
/// ```
/// use admit::registrar::{RegistrarError, UnavailableReason};
///
/// let down = RegistrarError::RegistrarUnavailable { reason: UnavailableReason::BackendUnavailable };
/// println!("{down}: retryable = {}", down.is_retryable());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnavailableReason {
    /// The invocation's intent record could not be written, so the invocation was refused
    /// (an unrecordable intent means refused): the record store needs attention.
    IntentUnrecordable,
    /// The backend the registrar mints through refused service or could not be reached.
    BackendUnavailable,
}

impl RegistrarError {
    /// Whether the same request may succeed later without anything else changing. True for
    /// [`RegistrarError::RegistrarBusy`] alone.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::RegistrarBusy { .. })
    }

    /// The wait before a retry, for the throttle; `None` for every permanent variant.
    pub fn retry_after(&self) -> Option<RetryAfter> {
        match self {
            Self::RegistrarBusy { retry_after } => Some(*retry_after),
            _ => None,
        }
    }
}

impl fmt::Display for RegistrarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ServiceInstanceMismatch { cause } => {
                write!(f, "refused, not retryable: {cause}; fix the request")
            }
            Self::SpecConflict => f.write_str(
                "refused, not retryable: the request conflicts with the specification already \
                 registered for this service",
            ),
            Self::NameCollision => f.write_str(
                "refused, not retryable: the derived name is already held by another instance",
            ),
            Self::HostMismatch => f.write_str(
                "refused, not retryable: the request names a host other than the caller's",
            ),
            Self::RegistrarUnavailable { reason } => {
                write!(f, "registrar unavailable until an operator acts: {reason}")
            }
            Self::RegistrarBusy { retry_after } => write!(
                f,
                "registrar busy: not attempted and not recorded; retry after {retry_after} \
                 (jitter it if several requests are outstanding)"
            ),
        }
    }
}

impl std::error::Error for RegistrarError {}

impl fmt::Display for MismatchCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ServiceNameNotDnsLabel => "`service_name` is not a DNS label",
            Self::HostNotDnsLabel => "`host` is not a DNS label",
            Self::NoMultiplicityEntry => "the component has no multiplicity entry",
        })
    }
}

impl fmt::Display for UnavailableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::IntentUnrecordable => {
                "the intent record could not be written; check the audit record store"
            }
            Self::BackendUnavailable => {
                "the backend refused service or could not be reached; restore the backend"
            }
        })
    }
}

/// How long a throttled caller waits before retrying: a whole number of seconds, at least 1.
///
/// A duration, never a deadline, so it does not depend on the caller's clock agreeing with
/// the daemon's; never zero, so it can never invite an immediate retry. Its value is the time
/// until the admission bucket holds one token again, from that bucket's accrual against its
/// refill interval, rounded up to whole seconds.
///
/// It is deterministic: every caller throttled at the same moment is told the same number. A
/// caller with several outstanding requests should add its own jitter (say, up to one more
/// second, drawn per request) so that its retries do not all arrive in the same instant.
///
/// ```
/// use admit::registrar::RetryAfter;
/// use std::time::Duration;
///
/// assert_eq!(RetryAfter::from_wait(Duration::from_millis(1_200)).secs(), 2, "rounded up");
/// assert_eq!(RetryAfter::from_wait(Duration::ZERO).secs(), 1, "at least one second");
/// assert_eq!(RetryAfter::from_secs(0), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RetryAfter(NonZeroU64);

impl RetryAfter {
    /// A wait of `secs` whole seconds.
    pub const fn new(secs: NonZeroU64) -> Self {
        Self(secs)
    }

    /// A wait of `secs` whole seconds; `None` for zero.
    pub const fn from_secs(secs: u64) -> Option<Self> {
        match NonZeroU64::new(secs) {
            Some(secs) => Some(Self(secs)),
            None => None,
        }
    }

    /// `wait` rounded up to whole seconds, at least 1.
    pub fn from_wait(wait: Duration) -> Self {
        let rounded = crate::bucket::retry_after_secs(wait);
        Self(NonZeroU64::new(rounded).unwrap_or(NonZeroU64::MIN))
    }

    /// The wait in whole seconds (at least 1).
    pub const fn secs(self) -> u64 {
        self.0.get()
    }

    /// The wait as a [`Duration`].
    pub const fn as_duration(self) -> Duration {
        Duration::from_secs(self.0.get())
    }
}

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} s", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_and_never_reaches_zero() {
        assert_eq!(RetryAfter::from_wait(Duration::ZERO).secs(), 1);
        assert_eq!(RetryAfter::from_wait(Duration::from_millis(1)).secs(), 1);
        assert_eq!(
            RetryAfter::from_wait(Duration::from_millis(1_000)).secs(),
            1
        );
        assert_eq!(
            RetryAfter::from_wait(Duration::from_millis(1_001)).secs(),
            2
        );
        assert_eq!(RetryAfter::from_secs(0), None);
        assert_eq!(RetryAfter::from_secs(3).map(RetryAfter::secs), Some(3));
        assert_eq!(
            RetryAfter::from_wait(Duration::from_millis(2_500)).as_duration(),
            Duration::from_secs(3)
        );
    }
}
