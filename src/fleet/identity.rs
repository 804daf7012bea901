//! Identities as Redis sees them: a keyed hash under a fleet-wide secret, never the raw string.
//!
//! Every process of a fleet hashes an identity with SipHash-1-3 under the same 128-bit secret
//! ([`FleetSecret`], from configuration), so they agree on its Redis key while no client can
//! compute which names share one (the hash is unknown without the secret). 47 bits of the hash
//! name the identity (two identities share a fleet budget with probability 2^-47 per pair:
//! never more tokens for either), packed with the class into one nonzero `u64` that travels
//! through the request ring and names the local table entry.

use siphasher::sip::SipHasher13;
use std::hash::{Hash, Hasher};

/// The fleet-wide secret key under which identities are hashed before they reach Redis.
///
/// Every process of one fleet must use the same secret (from configuration, like any shared
/// credential); a process with another secret counts its identities under other keys.
///
/// ```
/// use admit::fleet::FleetSecret;
///
/// let secret = FleetSecret::from_bytes(*b"sixteen byte key");
/// assert_eq!(format!("{secret:?}"), "FleetSecret(..)", "never printed");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FleetSecret {
    k0: u64,
    k1: u64,
}

impl FleetSecret {
    /// A secret from 16 bytes (for instance read from a secret store or an environment
    /// variable).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        let mut k0 = [0u8; 8];
        let mut k1 = [0u8; 8];
        for (i, b) in bytes.iter().enumerate() {
            if let Some(slot) = k0.get_mut(i) {
                *slot = *b;
            } else if let Some(slot) = k1.get_mut(i - 8) {
                *slot = *b;
            }
        }
        Self {
            k0: u64::from_le_bytes(k0),
            k1: u64::from_le_bytes(k1),
        }
    }
}

impl std::fmt::Debug for FleetSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetSecret(..)")
    }
}

/// The top bit of the 48-bit identity field: keeps every packed key nonzero (0 is an empty
/// ring slot).
const PRESENT: u64 = 1 << 47;

/// One (identity, class) as the fleet names it: `identity (48 bits) << 16 | class`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FleetKey(pub(crate) u64);

impl FleetKey {
    /// The key of `identity` in `class` under `secret`.
    pub(crate) fn new<K: Hash + ?Sized>(secret: &FleetSecret, identity: &K, class: u16) -> Self {
        let mut h = SipHasher13::new_with_keys(secret.k0, secret.k1);
        identity.hash(&mut h);
        let id = (h.finish() >> 16) | PRESENT;
        Self((id << 16) | u64::from(class))
    }

    /// The class.
    pub(crate) fn class(self) -> u16 {
        // The low 16 bits: fits by construction.
        u16::try_from(self.0 & 0xFFFF).unwrap_or(0)
    }

    /// The identity's hash: 48 bits, printed as 12 hex digits inside the Redis hash tag.
    pub(crate) fn identity(self) -> u64 {
        self.0 >> 16
    }

    /// The Redis key: `<prefix>:{<identity>}:<class>`. The braces are a Redis Cluster hash
    /// tag: every class of one identity lives in one slot.
    pub(crate) fn redis_key(self, prefix: &str) -> String {
        format!("{prefix}:{{{:012x}}}:{}", self.identity(), self.class())
    }

    /// The 64 bits the local table places the entry by: the packed key through a
    /// bijective mixer (splitmix64's finaliser), so the table's block choice (high bits) and
    /// tag (low bits) both depend on every bit of the identity.
    pub(crate) fn table_hash(self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_a_hash_tag_and_never_the_raw_name() {
        let secret = FleetSecret::from_bytes([7; 16]);
        let key = FleetKey::new(&secret, "alice@example.net", 3);
        let name = key.redis_key("admit");
        assert!(
            name.starts_with("admit:{") && name.ends_with("}:3"),
            "{name}"
        );
        assert!(!name.contains("alice"));
        assert_eq!(key.class(), 3);
        assert_ne!(key.0, 0);
        // Same secret, same key (another process); another secret, another key.
        assert_eq!(FleetKey::new(&secret, "alice@example.net", 3), key);
        let other = FleetSecret::from_bytes([8; 16]);
        assert_ne!(FleetKey::new(&other, "alice@example.net", 3), key);
        // One identity's classes share the hash tag (one cluster slot).
        let c0 = FleetKey::new(&secret, "alice@example.net", 0).redis_key("admit");
        assert_eq!(c0.split(':').nth(1), name.split(':').nth(1));
    }
}
