//! One hash per request: an actor hashed once, accepted by every primitive.
//!
//! A request that passes the in-flight quotas, the rate limiter and the volume quota used to
//! hash its actor three times, under three tables' keys. [`HashedActor::new`] hashes it once,
//! with SipHash-1-3 under two secret keys drawn from the OS once per process, and every
//! primitive derives what it needs from those 64 bits: the limiter and the in-flight quotas
//! their table slot, fingerprint and tag (and the in-flight sketch its cells), the volume quota
//! its buckets. The plain methods (`try_acquire(&identity, ..)`) hash the same way, so a
//! [`HashedActor`] and the identity it was made from always name the same entries.
//!
//! # Why no client can aim, and why the primitives stay independent
//!
//! * **Unaimable.** The 64 bits are a keyed PRF of the identity under keys no client sees, so
//!   to a client they are indistinguishable from random: it cannot compute identities that
//!   share a slot, a fingerprint or a bucket, in any primitive, without the keys. Each table
//!   derives its own bits by a keyed mix of the 64 (below), so even an attacker who learned one
//!   table's placement learns nothing of another's.
//! * **Independent.** Each table (each limiter, each `Quotas`, each volume quota) draws its own
//!   two 64-bit salts, and derives `fold((hash ⊕ s0 ⊕ class·φ) × (s1 | 1))`, where `fold` xors
//!   the two halves of the 128-bit product (the folded multiply of foldhash and ahash): a mix
//!   in which every output bit depends on every input bit. Two actors that meet in one table
//!   (one slot, one bucket) are, under the other tables' independent salts, no likelier to meet
//!   there than any two actors. The one event every table shares is two identities with the
//!   same 64-bit hash: probability 2^-64 per pair, 2.7·10^-8 for a million live actors, the
//!   same order as one table's own fingerprint bound at its largest cap (`crate::table`).
//!
//! The process keys are random in every build a user makes; loom models and fuzzing (which
//! must replay) use fixed ones, behind their `cfg`s.

use std::hash::{Hash, Hasher};

/// An actor's identity hashed once, for every primitive of this process.
///
/// Made once per request (or once per connection), then handed to
/// [`Limiter::try_acquire_hashed`](crate::Limiter::try_acquire_hashed),
/// [`Quotas::try_acquire_hashed`](crate::fairness::Quotas::try_acquire_hashed) and
/// [`RateLimit::try_acquire_hashed`](crate::quota::RateLimit::try_acquire_hashed): each
/// derives its own slots from it without hashing again. The identity is hashed exactly as its
/// [`Hash`] impl feeds it: `"a"` and `b"a"` are different actors (the first hashes as a `str`,
/// the second as a `[u8]` slice), exactly as for the plain methods.
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::quota::{Quota, RateLimit};
/// use admit::{BucketConfig, Clock, HashedActor, Limiter};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?])?;
/// let in_flight = Quotas::builder().quota(2).build()?;
/// let volume = RateLimit::new(Quota::default());
///
/// let actor = HashedActor::new("tenant-42"); // one SipHash for the whole request
/// let now = limiter.clock().now_ns();
/// let permit = in_flight.try_acquire_hashed(&actor)?;
/// limiter.try_acquire_hashed_at(&actor, 0, 1, now)?;
/// volume.try_acquire_hashed_at(&actor, 512, now)?;
///
/// // The same entries as the identity's own.
/// assert_eq!(in_flight.in_flight("tenant-42"), 1);
/// assert_eq!(volume.usage("tenant-42").bytes, 512);
/// drop(permit);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HashedActor {
    hash: u64,
}

impl HashedActor {
    /// Hashes `actor` under this process's secret keys.
    #[inline]
    pub fn new<A: Hash + ?Sized>(actor: &A) -> Self {
        let (k0, k1) = process_keys();
        let mut h = siphasher::sip::SipHasher13::new_with_keys(k0, k1);
        actor.hash(&mut h);
        Self { hash: h.finish() }
    }
}

impl std::fmt::Debug for HashedActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not secret, but nothing an operator can read either: the tracing digests are the
        // readable form.
        f.write_str("HashedActor(..)")
    }
}

/// What a decision path takes: an identity to hash, or one hashed already. The hash is made
/// only when the path needs it (an unlimited in-flight default admits without it).
pub(crate) trait Actor {
    fn hashed(&self) -> HashedActor;
}

/// An identity, hashed when asked.
pub(crate) struct Plain<'a, K: ?Sized>(pub(crate) &'a K);

impl<K: Hash + ?Sized> Actor for Plain<'_, K> {
    #[inline]
    fn hashed(&self) -> HashedActor {
        HashedActor::new(self.0)
    }
}

impl Actor for HashedActor {
    #[inline]
    fn hashed(&self) -> HashedActor {
        *self
    }
}

/// One table's derivation salts: two secret words drawn per table.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Salt {
    s0: u64,
    /// Odd, so the multiply is a bijection of the 64-bit word.
    s1: u64,
}

/// `φ`: spreads the class over the word before it is mixed.
const CLASS_SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

impl Salt {
    /// Fresh secret salts.
    pub(crate) fn random() -> Self {
        Self::fixed(crate::entropy::random_u64(), crate::entropy::random_u64())
    }

    /// Given salts, for reproducible placement in tests and models.
    pub(crate) fn fixed(s0: u64, s1: u64) -> Self {
        Self { s0, s1: s1 | 1 }
    }

    /// This table's 64 bits for `actor` in `class`: `fold((hash ⊕ s0 ⊕ class·φ) × s1)`.
    #[inline]
    pub(crate) fn derive(&self, actor: &HashedActor, class: u16) -> u64 {
        let x = actor.hash ^ self.s0 ^ u64::from(class).wrapping_mul(CLASS_SPREAD);
        let product = u128::from(x) * u128::from(self.s1);
        // The casts keep the low and the high half of the product, on purpose.
        (product as u64) ^ ((product >> 64) as u64)
    }
}

impl std::fmt::Debug for Salt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Part of the defence against aimed collisions: never printed.
        f.write_str("Salt(..)")
    }
}

/// The process's SipHash keys: drawn from the OS on first use, the same for every primitive.
#[cfg(not(any(admit_loom, fuzzing)))]
#[inline]
fn process_keys() -> (u64, u64) {
    static KEYS: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    *KEYS.get_or_init(|| (crate::entropy::random_u64(), crate::entropy::random_u64()))
}

/// Fixed keys: loom models and fuzz runs must place actors the same way every run.
#[cfg(any(admit_loom, fuzzing))]
fn process_keys() -> (u64, u64) {
    (0x736f_6d65_7073_6575, 0x646f_7261_6e64_6f6d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_identity_one_hash_and_types_stay_apart() {
        assert_eq!(HashedActor::new("a"), HashedActor::new("a"));
        assert_ne!(HashedActor::new("a"), HashedActor::new(&b"a"[..]));
        assert_ne!(HashedActor::new("a"), HashedActor::new("b"));
        assert_eq!(format!("{:?}", HashedActor::new("a")), "HashedActor(..)");
    }

    #[test]
    fn classes_and_salts_derive_different_bits() {
        let a = HashedActor::new("actor");
        let (s, t) = (Salt::fixed(1, 2), Salt::fixed(3, 4));
        assert_ne!(s.derive(&a, 0), s.derive(&a, 1));
        assert_ne!(s.derive(&a, 0), t.derive(&a, 0));
        assert_eq!(s.derive(&a, 0), s.derive(&HashedActor::new("actor"), 0));
    }

    #[test]
    fn a_meeting_in_one_table_says_nothing_of_another() {
        // 2^16 actors into 2^8 cells of two tables with independent salts: pairs that share a
        // cell in the first table share one in the second about 1/256 of the time, as any
        // pair does. Seeded salts, so the test is exact every run.
        let (first, second) = (
            Salt::fixed(0x0123_4567_89ab_cdef, 0x0fed_cba9_8765_4321),
            Salt::fixed(0x1357_9bdf_0246_8ace, 0x7531_fdb9_8642_eca0),
        );
        let cell = |s: &Salt, a: &HashedActor| (s.derive(a, 0) >> 56) as usize;
        let actors: Vec<HashedActor> = (0..1u32 << 16).map(|i| HashedActor::new(&i)).collect();
        // Group by first-table cell; count pairs inside each group that also share a
        // second-table cell.
        let mut groups = vec![Vec::new(); 256];
        for a in &actors {
            groups[cell(&first, a)].push(cell(&second, a));
        }
        let (mut pairs, mut both) = (0u64, 0u64);
        for g in &groups {
            let mut counts = [0u64; 256];
            for &c in g {
                counts[c] += 1;
            }
            let n = g.len() as u64;
            pairs += n * (n - 1) / 2;
            both += counts
                .iter()
                .map(|k| k * k.saturating_sub(1) / 2)
                .sum::<u64>();
        }
        let rate = both as f64 / pairs as f64;
        assert!(
            (rate - 1.0 / 256.0).abs() < 0.2 / 256.0,
            "pairs meeting in the first table met in the second at {rate}, not ~1/256"
        );
    }
}
