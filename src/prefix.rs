//! A source widened to its network prefix: the identity a limit keyed by
//! [`KeyKind::SourcePrefix`](crate::gate::KeyKind::SourcePrefix) charges.
//!
//! An attacker who holds a network (an IPv4 /24, an IPv6 /48, a rented /32) can take a fresh
//! address for every request: a limit keyed by the address then grants each its full burst,
//! and every fresh address claims an entry of the limiter's table, until the table is full of
//! drained entries and every newcomer pays the class's shared overflow bucket. A limit keyed
//! by the prefix, charged before the per-address one, refuses the rotation at its prefix's
//! budget before it claims per-address entries (see "When newcomers keep their budget" on [`IpPrefix`]).
//!
//! # Invariant
//!
//! **A prefix never names the bucket of an address, nor of another prefix length.** Its
//! identity is the tagged tuple `("source prefix", masked address, prefix length)`, hashed
//! once ([`IpPrefix::hashed`]): an address is hashed as a bare [`IpAddr`], so the two feed
//! different bytes to the hash, and a /24 of `192.0.2.0` and the address `192.0.2.0` (or its
//! /16) are three identities. Tested in `prefix::tests`.

use crate::actor::HashedActor;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How far a source address is widened for the limits keyed by its prefix: IPv4 addresses
/// to their first `ipv4` bits, IPv6 addresses to their first `ipv6` bits (an IPv4-mapped IPv6
/// address as the IPv4 address it maps). [`IpPrefix::default`] is a /24 and a /48: the usual
/// allocation to one customer network.
///
/// # When newcomers keep their budget
///
/// Give a gate a limit keyed by [`KeyKind::SourcePrefix`](crate::gate::KeyKind::SourcePrefix)
/// (rate `r_p`, burst `b_p`, in a limiter of its own, cap `cap_p`) *before* the per-address
/// limit (rate `r_a`, burst `b_a`, cap `cap_a`): the plan charges limits in the order given,
/// so a request its prefix refuses never reaches the per-address table. A per-address entry
/// is kept until it has refilled, at most its refill span `D_a = b_a / r_a` after its last
/// charge (`1 / r_a` for an address used once), so every entry alive at an instant was charged
/// within the last `D_a`, and one prefix holds at most **`b_p + r_p·D_a`** of them, however
/// many addresses it rotates through. Honest newcomers are then admitted on entries of their
/// own, never the per-address limit's shared overflow bucket, for as long as the flood lasts,
/// while both tables hold what is alive in them:
///
/// * **the per-address table**: `P × (b_p + r_p·D_a) + H_a ≤ cap_a`, with `P` the attacker's
///   prefixes and `H_a` the honest addresses active within `D_a`;
/// * **the prefix table**: `P + H_p ≤ cap_p`, with `H_p` the honest prefixes active within
///   the prefix limit's own refill span `b_p / r_p` (an attacker's prefix stays drained, so
///   each holds its entry for the whole flood).
///
/// Past either, newcomers share an overflow bucket the flood keeps empty, as without the
/// prefix limit. A **rented IPv6 /32 holds 65,536 /48s**: keyed by /48, `P = 65,536`, and at
/// the largest cap (2^20 entries, 30 MiB) the address table holds them only if
/// `b_p + r_p·D_a ≤ 16` with no honest client beside them; at a /48 budget of 20 requests
/// that is 1.3 million entries, and newcomers pay the overflow. Against such a renter, widen
/// the IPv6 prefix to its /32 (`IpPrefix::new(24, 32)`): the /32 is then one prefix, at the
/// price of every honest client of one provider's /32 sharing that prefix's budget (size
/// `b_p` and `r_p` for the busiest /32 you serve). `admit-sim prefix` shows each case: one
/// /48 and P of them rotating beside honest newcomers, with and without the /48 limit, and a
/// rented /32 keyed by /48 and by /32.
///
/// ```
/// use admit::{HashedActor, IpPrefix};
/// use std::net::IpAddr;
///
/// let prefix = IpPrefix::default();
/// let a: IpAddr = "2001:db8:aa:1::7".parse()?;
/// let b: IpAddr = "2001:db8:aa:ffff::1".parse()?;
/// assert_eq!(prefix.mask(a), "2001:db8:aa::".parse::<IpAddr>()?);
/// assert_eq!(prefix.hashed(a), prefix.hashed(b), "one /48, one identity");
/// // A prefix is never the identity of an address, even of the address it masks to.
/// let v4: IpAddr = "192.0.2.0".parse()?;
/// assert_ne!(prefix.hashed(v4), HashedActor::new(&v4));
/// assert_eq!(IpPrefix::new(33, 48).unwrap_err().to_string(), "an IPv4 prefix of 33 bits: an IPv4 address has 32");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    ipv4: u8,
    ipv6: u8,
}

/// The tag that sets a prefix's identity apart from an address's (see the module's
/// invariant).
const TAG: &str = "source prefix";

impl IpPrefix {
    /// The IPv4 prefix length by default: a /24.
    pub const DEFAULT_IPV4: u8 = 24;
    /// The IPv6 prefix length by default: a /48, one site.
    pub const DEFAULT_IPV6: u8 = 48;

    /// IPv4 addresses widened to `ipv4` bits (at most 32), IPv6 to `ipv6` bits (at most 128).
    pub fn new(ipv4: u8, ipv6: u8) -> Result<Self, IpPrefixError> {
        if ipv4 > 32 {
            return Err(IpPrefixError::Ipv4TooLong { bits: ipv4 });
        }
        if ipv6 > 128 {
            return Err(IpPrefixError::Ipv6TooLong { bits: ipv6 });
        }
        Ok(Self { ipv4, ipv6 })
    }

    /// The IPv4 prefix length.
    pub fn ipv4_bits(&self) -> u8 {
        self.ipv4
    }

    /// The IPv6 prefix length.
    pub fn ipv6_bits(&self) -> u8 {
        self.ipv6
    }

    /// The prefix length `ip` is widened to.
    fn bits_of(&self, ip: IpAddr) -> u8 {
        match ip {
            IpAddr::V4(_) => self.ipv4,
            IpAddr::V6(_) => self.ipv6,
        }
    }

    /// `ip`'s prefix: its canonical form (an IPv4-mapped IPv6 address as IPv4) with every bit
    /// past the prefix cleared.
    pub fn mask(&self, ip: IpAddr) -> IpAddr {
        match ip.to_canonical() {
            IpAddr::V4(v4) => IpAddr::V4(mask_v4(v4, self.ipv4)),
            IpAddr::V6(v6) => IpAddr::V6(mask_v6(v6, self.ipv6)),
        }
    }

    /// The identity of `ip`'s prefix, hashed once: the tuple `("source prefix", mask(ip),
    /// length)`, so code beside an HTTP layer charges the same bucket with the same call.
    /// Hand it to [`Admission::source_prefix`](crate::gate::Admission::source_prefix).
    #[inline]
    pub fn hashed(&self, ip: IpAddr) -> HashedActor {
        let masked = self.mask(ip);
        HashedActor::new(&(TAG, masked, self.bits_of(masked)))
    }
}

impl Default for IpPrefix {
    fn default() -> Self {
        Self {
            ipv4: Self::DEFAULT_IPV4,
            ipv6: Self::DEFAULT_IPV6,
        }
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IPv4 /{}, IPv6 /{}", self.ipv4, self.ipv6)
    }
}

/// Why an [`IpPrefix`] could not be made: a prefix longer than its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpPrefixError {
    /// An IPv4 prefix of more than 32 bits.
    Ipv4TooLong {
        /// The length asked for.
        bits: u8,
    },
    /// An IPv6 prefix of more than 128 bits.
    Ipv6TooLong {
        /// The length asked for.
        bits: u8,
    },
}

impl fmt::Display for IpPrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ipv4TooLong { bits } => {
                write!(f, "an IPv4 prefix of {bits} bits: an IPv4 address has 32")
            }
            Self::Ipv6TooLong { bits } => {
                write!(f, "an IPv6 prefix of {bits} bits: an IPv6 address has 128")
            }
        }
    }
}

impl std::error::Error for IpPrefixError {}

/// `ip` with every bit past the first `bits` cleared (`bits` at most 32; more keeps all).
fn mask_v4(ip: Ipv4Addr, bits: u8) -> Ipv4Addr {
    // A shift by the full width is not defined for `<<`; `checked_shl` says so, and a /0
    // keeps no bit at all.
    let mask = u32::MAX
        .checked_shl(32_u32.saturating_sub(u32::from(bits)))
        .unwrap_or(0);
    Ipv4Addr::from(u32::from(ip) & mask)
}

/// `ip` with every bit past the first `bits` cleared (`bits` at most 128; more keeps all).
pub(crate) fn mask_v6(ip: Ipv6Addr, bits: u8) -> Ipv6Addr {
    // As in `mask_v4`.
    let mask = u128::MAX
        .checked_shl(128_u32.saturating_sub(u32::from(bits)))
        .unwrap_or(0);
    Ipv6Addr::from(u128::from(ip) & mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_prefix_is_never_an_address_nor_another_length() {
        let p24 = IpPrefix::default();
        let p16 = IpPrefix::new(16, 48).unwrap();
        let p32 = IpPrefix::new(32, 128).unwrap();
        for text in ["192.0.2.0", "10.0.0.0", "0.0.0.0", "2001:db8::", "::"] {
            let address = ip(text);
            assert_ne!(p24.hashed(address), HashedActor::new(&address), "{text}");
            // A full-length prefix keeps every bit, and is still not the address.
            assert_ne!(p32.hashed(address), HashedActor::new(&address), "{text}");
        }
        assert_ne!(p24.hashed(ip("10.0.0.1")), p16.hashed(ip("10.0.0.1")));
    }

    #[test]
    fn addresses_of_one_prefix_share_it_and_others_do_not() {
        let p = IpPrefix::default();
        assert_eq!(p.hashed(ip("203.0.113.7")), p.hashed(ip("203.0.113.250")));
        assert_ne!(p.hashed(ip("203.0.113.7")), p.hashed(ip("203.0.114.7")));
        assert_eq!(
            p.hashed(ip("2001:db8:1:2::1")),
            p.hashed(ip("2001:db8:1:ff::9"))
        );
        assert_ne!(p.hashed(ip("2001:db8:1::1")), p.hashed(ip("2001:db8:2::1")));
        // An IPv4-mapped address is the IPv4 address it maps.
        assert_eq!(
            p.hashed(ip("::ffff:203.0.113.9")),
            p.hashed(ip("203.0.113.1"))
        );
        assert_eq!(p.mask(ip("::ffff:203.0.113.9")), ip("203.0.113.0"));
    }

    #[test]
    fn lengths_from_none_to_all() {
        let none = IpPrefix::new(0, 0).unwrap();
        assert_eq!(none.mask(ip("203.0.113.7")), ip("0.0.0.0"));
        assert_eq!(none.mask(ip("2001:db8::1")), ip("::"));
        let all = IpPrefix::new(32, 128).unwrap();
        assert_eq!(all.mask(ip("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(all.mask(ip("2001:db8::1")), ip("2001:db8::1"));
        assert_eq!(
            IpPrefix::new(24, 129),
            Err(IpPrefixError::Ipv6TooLong { bits: 129 })
        );
        assert_eq!(
            IpPrefix::new(33, 48),
            Err(IpPrefixError::Ipv4TooLong { bits: 33 })
        );
    }
}
