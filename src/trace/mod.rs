//! The refusal events of feature `tracing`: one `debug!` per refusal, naming the actor only by
//! a keyed digest.
//!
//! The digest is SipHash-1-3, under a key of its own drawn per instance, of what the
//! primitive already hashed the identity to (the limiter's and the quotas' table key, the
//! volume quota's row hash). It is stable for one identity (and class) within one instance,
//! so a log reader can tell one flooding actor from many, and reveals nothing else: not the
//! identity, and not where it lives in the table. Printing the table hash itself would hand
//! whoever reads the logs what the secret table keys exist to hide (which identities share a
//! probe window or a bucket), so it is never printed.
//!
//! A refusal that [shadow mode](crate::shadow) admitted instead is the same event with
//! `shadow = true` (enforcing, `shadow = false`): a log reader sees whom a new limit would
//! refuse before it refuses anyone.
//!
//! Each event is built only if a subscriber wants it (`tracing` evaluates the fields inside
//! its enabled check, so the digest is computed then and only then), and only on a refusal.
//! Without the feature none of this is compiled.
//!
//! This module knows none of the primitives: each event takes what it reports through a small
//! trait defined here ([`RateRefusal`], [`InFlightRefusal`], [`VolumeRefusal`]), implemented
//! beside the refusal type it reads, so the primitives import `trace` and never the reverse.

#[cfg(test)]
mod tests;

use crate::table::Key;
use siphasher::sip::SipHasher13;
use std::fmt;
use std::hash::Hasher;
use std::time::Duration;

/// A per-instance secret key for the actor digests of refusal events.
pub(crate) struct Digest {
    k0: u64,
    k1: u64,
}

impl Digest {
    /// A fresh random key.
    pub(crate) fn random() -> Self {
        Self {
            k0: crate::entropy::random_u64(),
            k1: crate::entropy::random_u64(),
        }
    }

    /// The digest of a table key (the limiter's, whose key includes the class, and the
    /// quotas').
    pub(crate) fn of_key(&self, key: &Key) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write_u64(key.home as u64);
        h.write_u32(key.fp);
        h.write_u32(key.tag);
        h.finish()
    }

    /// The digest of a 64-bit keyed hash (the volume quota's).
    pub(crate) fn of_hash(&self, hash: u64) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write_u64(hash);
        h.finish()
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A secret, like the table's keys.
        f.debug_struct("Digest").finish_non_exhaustive()
    }
}

/// A digest printed as 16 hex digits (a string field: a JSON consumer would round a `u64`).
struct Hex(u64);

impl fmt::Display for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Nanoseconds, saturated at `u64::MAX` (585 years).
fn nanos(wait: Duration) -> u64 {
    u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX)
}

/// What a limiter refusal event reports (implemented by `limiter::Limited`).
pub(crate) trait RateRefusal {
    /// The class whose bucket had no token.
    fn class(&self) -> usize;
    /// The time until that bucket holds enough tokens.
    fn wait(&self) -> Duration;
    /// Whether the class's shared overflow bucket refused.
    fn via_overflow(&self) -> bool;
}

/// What an in-flight refusal event reports (implemented by `fairness::QuotasRefused`).
pub(crate) trait InFlightRefusal {
    /// The quota that was hit.
    fn limit(&self) -> u32;
    /// Ops counted against that quota when the op was refused.
    fn in_flight(&self) -> u32;
    /// Whether the shared overflow quota refused.
    fn via_overflow(&self) -> bool;
}

/// What a volume refusal event reports (implemented by `quota::VolumeExceeded`).
pub(crate) trait VolumeRefusal {
    /// The limit that refused: `"events"` or `"bytes"`.
    fn limit_name(&self) -> &'static str;
    /// That limit's value per window.
    fn max(&self) -> u32;
    /// What the actor's bucket had counted against it.
    fn used(&self) -> u32;
    /// Time until the window turns.
    fn window_turns_in(&self) -> Duration;
    /// Whether no amount of waiting admits the write.
    fn is_permanent(&self) -> bool;
}

/// A limiter charge was refused.
#[cold]
pub(crate) fn limiter_refused<R: RateRefusal + ?Sized>(
    actor: impl FnOnce() -> u64,
    limited: &R,
    shadow: bool,
) {
    tracing::debug!(
        target: "admit::limiter",
        actor = %Hex(actor()),
        class = limited.class(),
        wait_ns = nanos(limited.wait()),
        via_overflow = limited.via_overflow(),
        shadow,
        "refused"
    );
}

/// An in-flight acquire was refused.
#[cold]
pub(crate) fn in_flight_refused<R: InFlightRefusal + ?Sized>(
    actor: impl FnOnce() -> u64,
    refused: &R,
    shadow: bool,
) {
    tracing::debug!(
        target: "admit::fairness",
        actor = %Hex(actor()),
        limit = refused.limit(),
        in_flight = refused.in_flight(),
        via_overflow = refused.via_overflow(),
        shadow,
        "refused"
    );
}

/// A volume charge was refused.
#[cold]
pub(crate) fn volume_refused<R: VolumeRefusal + ?Sized>(
    actor: impl FnOnce() -> u64,
    exceeded: &R,
    shadow: bool,
) {
    tracing::debug!(
        target: "admit::quota",
        actor = %Hex(actor()),
        limit = %exceeded.limit_name(),
        max = exceeded.max(),
        used = exceeded.used(),
        wait_ns = nanos(exceeded.window_turns_in()),
        permanent = exceeded.is_permanent(),
        shadow,
        "refused"
    );
}
