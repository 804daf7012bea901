//! Secret per-instance randomness: the SipHash keys of every table and every limiter's id.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// A fresh secret `u64` from the operating system.
///
/// Never panics. If the OS source fails (a sandbox without `getrandom(2)` or `/dev/urandom`,
/// say), the value comes from [`RandomState`] instead: std seeds it from the same OS source
/// once per thread, through its own platform fallbacks, and advances its keys on every
/// `RandomState::new()`, so successive values still differ and no client can predict them
/// unless the whole machine's randomness is broken. A refusal here would make every limiter
/// unbuildable over a failure that only weakens, and does not remove, the defence against
/// aimed collisions, which is why there is no error to return.
pub(crate) fn random_u64() -> u64 {
    getrandom::u64().unwrap_or_else(|_| RandomState::new().build_hasher().finish())
}

#[cfg(test)]
mod tests {
    #[test]
    fn draws_differ() {
        let a = super::random_u64();
        let b = super::random_u64();
        assert_ne!(a, b);
    }
}
