//! Whose request is it: the identity a request is charged to, taken from the request itself.
//!
//! Four extractors cover the usual cases, and [`KeyExtractor`] is the seam for any other:
//!
//! | extractor | the identity | when it is missing |
//! |---|---|---|
//! | [`PeerIp`] | the peer's IP address, IPv6 masked to its /64 (configurable) | [`MissingKey::PeerAddr`] (500: the server records no peer address) |
//! | [`ClientIp`](super::ClientIp) | behind trusted proxies, the client they name (`X-Forwarded-For`, `Forwarded`, a CDN's header), masked as [`PeerIp`]; from any other peer, the peer | [`MissingKey::ForwardedChain`] (400: the chain names no client), [`MissingKey::PeerAddr`] (500) |
//! | [`HeaderKey`] | the bytes of one named header | [`MissingKey::Header`] (400: the client sent none) |
//! | [`KeyFn`] | whatever a closure returns | [`MissingKey::Custom`] (400) |
//!
//! An identity is fed through its `Hash` impl to the primitives exactly as if the caller had
//! passed it to them directly, so code beside the layer can charge or read the same identity:
//! an [`IpAddr`] for [`PeerIp`], and for [`HeaderKey`] the header value's bytes, a `[u8]`
//! (see "One identity, one type" in [`crate::limiter`]).
//!
//! A key may borrow from the request ([`KeyExtractor::Key`] has the request's lifetime):
//! [`HeaderKey`] hands the primitives the header's bytes where they lie, with no copy and no
//! reference count touched.

use crate::prefix::mask_v6;
use http::header::HeaderName;
use http::{Extensions, Request};
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::ops::Deref;

use super::AdmitConfigError;

/// Takes the identity a request is charged to. Implemented by [`PeerIp`], [`HeaderKey`] and
/// [`KeyFn`]; implement it for any other source. The key may borrow from the request (as
/// `&'r str` below): it is hashed before the request moves on.
///
/// ```
/// use admit::tower::{KeyExtractor, MissingKey};
/// use http::Request;
///
/// /// The first path segment: `/tenant-7/orders` is charged to `tenant-7`.
/// #[derive(Clone)]
/// struct Tenant;
///
/// impl<B> KeyExtractor<B> for Tenant {
///     type Key<'r> = &'r str where B: 'r;
///     fn extract<'r>(&self, request: &'r Request<B>) -> Result<&'r str, MissingKey> {
///         let segment = request.uri().path().split('/').nth(1).unwrap_or("");
///         if segment.is_empty() { Err(MissingKey::Custom) } else { Ok(segment) }
///     }
/// }
///
/// let request = Request::get("/tenant-7/orders").body(())?;
/// assert_eq!(Tenant.extract(&request)?, "tenant-7");
/// assert!(Tenant.extract(&Request::get("/").body(())?).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait KeyExtractor<B> {
    /// The identity: any `Hash` type, charged as the primitives charge it, owned or borrowed
    /// from the request.
    type Key<'r>: Hash
    where
        B: 'r;

    /// The identity of `request`, or why there is none.
    fn extract<'r>(&self, request: &'r Request<B>) -> Result<Self::Key<'r>, MissingKey>;
}

/// Why a request had no identity. What the layer then does is its
/// [`MissingKeyPolicy`](super::MissingKeyPolicy): refuse (the default) or let it pass.
///
/// ```
/// use admit::tower::{HeaderKey, KeyExtractor, MissingKey};
/// use http::{HeaderName, Request};
///
/// let key = HeaderKey::new(HeaderName::from_static("x-api-key"));
/// let missing = key.extract(&Request::new(())).unwrap_err();
/// assert_eq!(missing, MissingKey::Header(HeaderName::from_static("x-api-key")));
/// assert!(missing.to_string().contains("x-api-key"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingKey {
    /// No peer address in the request's extensions: the server was not set up to record one
    /// (a server-side fault, answered 500).
    PeerAddr,
    /// The named header is absent or empty (the client's fault, answered 400).
    Header(HeaderName),
    /// A [`KeyFn`] or a custom extractor found none (answered 400).
    Custom,
    /// A trusted proxy's chain names no client that [`ClientIp`](super::ClientIp) can charge
    /// (answered 400): never charged to an address the client wrote, nor to the proxy.
    ForwardedChain {
        /// The header read.
        header: HeaderName,
        /// Why it names no client.
        why: super::UnreadableChain,
    },
}

impl fmt::Display for MissingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PeerAddr => f.write_str(
                "no peer address recorded for this request: serve with connection info \
                 (axum: `into_make_service_with_connect_info::<SocketAddr>()` and \
                 `PeerIp::from_extension::<ConnectInfo<SocketAddr>>()`)",
            ),
            Self::Header(name) => write!(f, "the request has no `{name}` header to key it by"),
            Self::Custom => f.write_str("the request carries no identity to key it by"),
            Self::ForwardedChain { header, why } => write!(
                f,
                "the request came through a trusted proxy, but its `{header}` header cannot \
                 name the client to key it by: {why}"
            ),
        }
    }
}

impl std::error::Error for MissingKey {}

/// Keys a request by its peer's IP address: an IPv4 address whole, an IPv6 address masked to
/// its first 64 bits (configurable with [`PeerIp::ipv6_prefix`]), since one IPv6 host
/// commonly holds a whole /64 and could otherwise take a fresh identity per request. An
/// IPv4-mapped IPv6 address (`::ffff:192.0.2.7`) is keyed as the IPv4 address it maps.
///
/// The address is read from the request's extensions: by default a [`SocketAddr`] (as a
/// hyper server records it by hand); behind axum,
/// `PeerIp::new().from_extension::<axum::extract::ConnectInfo<SocketAddr>>()` reads what
/// `into_make_service_with_connect_info::<SocketAddr>()` records. Behind a proxy, a balancer
/// or a CDN the peer is the proxy, and every client behind it would share one bucket: use
/// [`ClientIp`](super::ClientIp) there, which reads the proxy's `X-Forwarded-For` or
/// `Forwarded` from the right, and only from the proxies you trust. A header key
/// ([`HeaderKey`]) would read what the client wrote.
///
/// ```
/// use admit::tower::{KeyExtractor, PeerIp};
/// use http::Request;
/// use std::net::{IpAddr, SocketAddr};
///
/// let peer = PeerIp::new();
/// let mut request = Request::new(());
/// request.extensions_mut().insert(SocketAddr::from(([0x2001, 0xdb8, 0, 7, 1, 2, 3, 4], 443)));
/// let expected: IpAddr = "2001:db8:0:7::".parse()?;
/// assert_eq!(peer.extract(&request)?, expected, "masked to its /64");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct PeerIp {
    ipv6_prefix: u8,
    read: fn(&Extensions) -> Option<SocketAddr>,
}

impl PeerIp {
    /// The IPv6 prefix length an address is masked to by default: 64 bits, the usual
    /// allocation to one host or one site's subnet.
    pub const DEFAULT_IPV6_PREFIX: u8 = 64;

    /// Reads a [`SocketAddr`] extension; masks IPv6 to [`PeerIp::DEFAULT_IPV6_PREFIX`] bits.
    pub fn new() -> Self {
        Self {
            ipv6_prefix: Self::DEFAULT_IPV6_PREFIX,
            read: |extensions| extensions.get::<SocketAddr>().copied(),
        }
    }

    /// Masks IPv6 addresses to their first `bits` bits (0 to 128: 128 keys each address
    /// apart, 48 a whole site, 0 all IPv6 peers together). IPv4 addresses are never masked.
    ///
    /// ```
    /// use admit::tower::{AdmitConfigError, PeerIp};
    /// use std::net::IpAddr;
    ///
    /// let peer = PeerIp::new().ipv6_prefix(48)?;
    /// let ip: IpAddr = "2001:db8:aa:bb::1".parse()?;
    /// assert_eq!(peer.key_of(ip), "2001:db8:aa::".parse::<IpAddr>()?);
    /// assert_eq!(PeerIp::new().ipv6_prefix(129).unwrap_err(), AdmitConfigError::Ipv6PrefixTooLong { bits: 129 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ipv6_prefix(mut self, bits: u8) -> Result<Self, AdmitConfigError> {
        if bits > 128 {
            return Err(AdmitConfigError::Ipv6PrefixTooLong { bits });
        }
        self.ipv6_prefix = bits;
        Ok(self)
    }

    /// Reads the peer address from an extension of type `E` that dereferences to a
    /// [`SocketAddr`], such as axum's `ConnectInfo<SocketAddr>`, instead of a bare
    /// `SocketAddr`.
    ///
    /// ```
    /// use admit::tower::{KeyExtractor, PeerIp};
    /// use axum::extract::ConnectInfo;
    /// use http::Request;
    /// use std::net::{IpAddr, SocketAddr};
    ///
    /// let peer = PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>();
    /// let mut request = Request::new(());
    /// request.extensions_mut().insert(ConnectInfo(SocketAddr::from(([192, 0, 2, 7], 50_000))));
    /// assert_eq!(peer.extract(&request)?, IpAddr::from([192, 0, 2, 7]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_extension<E>(mut self) -> Self
    where
        E: Deref<Target = SocketAddr> + Send + Sync + 'static,
    {
        self.read = |extensions| extensions.get::<E>().map(|addr| **addr);
        self
    }

    /// The peer's address recorded in `extensions`, if any.
    pub(super) fn peer_addr(&self, extensions: &Extensions) -> Option<SocketAddr> {
        (self.read)(extensions)
    }

    /// The identity of a peer at `ip`: IPv4 whole (IPv4-mapped IPv6 included), IPv6 masked to
    /// the configured prefix.
    ///
    /// ```
    /// use admit::tower::PeerIp;
    /// use std::net::IpAddr;
    ///
    /// let peer = PeerIp::new();
    /// let a: IpAddr = "2001:db8::1".parse()?;
    /// let b: IpAddr = "2001:db8::ffff:2".parse()?;
    /// assert_eq!(peer.key_of(a), peer.key_of(b), "one /64, one identity");
    /// let mapped: IpAddr = "::ffff:192.0.2.7".parse()?;
    /// assert_eq!(peer.key_of(mapped), IpAddr::from([192, 0, 2, 7]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key_of(&self, ip: IpAddr) -> IpAddr {
        match ip.to_canonical() {
            IpAddr::V4(v4) => IpAddr::V4(v4),
            IpAddr::V6(v6) => IpAddr::V6(mask_v6(v6, self.ipv6_prefix)),
        }
    }
}

impl Default for PeerIp {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for PeerIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerIp")
            .field("ipv6_prefix", &self.ipv6_prefix)
            .finish_non_exhaustive()
    }
}

impl<B> KeyExtractor<B> for PeerIp {
    type Key<'r>
        = IpAddr
    where
        B: 'r;

    fn extract(&self, request: &Request<B>) -> Result<IpAddr, MissingKey> {
        (self.read)(request.extensions())
            .map(|addr| self.key_of(addr.ip()))
            .ok_or(MissingKey::PeerAddr)
    }
}

/// Keys a request by the value of one header (an API key, a tenant id, a proxy's client-IP
/// header): its first value's bytes, borrowed from the request, charged as a `[u8]` (code
/// beside the layer charges the same identity with `value.as_bytes()`). An absent or empty
/// header is a [`MissingKey::Header`].
///
/// The value is what the client claims, so this keys by a claim: right behind an
/// authenticating proxy, or for fairness between honest clients; an attacker can rotate it.
///
/// ```
/// use admit::tower::{HeaderKey, KeyExtractor};
/// use http::{HeaderName, Request};
///
/// let key = HeaderKey::new(HeaderName::from_static("x-api-key"));
/// let request = Request::get("/").header("x-api-key", "k-123").body(())?;
/// assert_eq!(key.extract(&request)?, b"k-123");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct HeaderKey {
    name: HeaderName,
}

impl HeaderKey {
    /// Keys by header `name`.
    pub fn new(name: HeaderName) -> Self {
        Self { name }
    }

    /// The header keyed by.
    pub fn name(&self) -> &HeaderName {
        &self.name
    }
}

impl<B> KeyExtractor<B> for HeaderKey {
    /// The value's bytes, borrowed from the request.
    type Key<'r>
        = &'r [u8]
    where
        B: 'r;

    // Always: as `HashedActor::new`, inlined into each layer's decision.
    #[inline(always)]
    fn extract<'r>(&self, request: &'r Request<B>) -> Result<&'r [u8], MissingKey> {
        request
            .headers()
            .get(&self.name)
            .map(|value| value.as_bytes())
            .filter(|bytes| !bytes.is_empty())
            .ok_or_else(|| MissingKey::Header(self.name.clone()))
    }
}

/// Keys a request by what a closure returns; `None` is a [`MissingKey::Custom`].
///
/// ```
/// use admit::tower::{KeyExtractor, KeyFn};
/// use http::Request;
///
/// // The host the request is addressed to, lowercased.
/// let host = KeyFn::new(|request: &Request<()>| {
///     request.headers().get("host")?.to_str().ok().map(str::to_ascii_lowercase)
/// });
/// let request = Request::get("/").header("host", "API.example.com").body(())?;
/// assert_eq!(host.extract(&request)?, "api.example.com");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct KeyFn<F> {
    f: F,
}

impl<F> KeyFn<F> {
    /// Keys by `f`.
    pub fn new<B, K>(f: F) -> Self
    where
        F: Fn(&Request<B>) -> Option<K>,
        K: Hash,
    {
        Self { f }
    }
}

impl<F> fmt::Debug for KeyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFn").finish_non_exhaustive()
    }
}

impl<B, K, F> KeyExtractor<B> for KeyFn<F>
where
    F: Fn(&Request<B>) -> Option<K>,
    K: Hash,
{
    type Key<'r>
        = K
    where
        B: 'r;

    fn extract(&self, request: &Request<B>) -> Result<K, MissingKey> {
        (self.f)(request).ok_or(MissingKey::Custom)
    }
}
