//! The source: who a request comes from, beside what it claims to be.
//!
//! The layer's key extractor gives the request's **claim** (an API key id, a tenant header: a
//! name the client chose). By default the claim is also the **source**, and every defence of
//! the gate charges it. [`AdmitLayerBuilder::source`](super::AdmitLayerBuilder::source) gives
//! the source its own extractor, usually the client's address ([`ClientIp`](super::ClientIp)
//! behind trusted proxies, [`PeerIp`](super::PeerIp) without): the gate's limits keyed by
//! [`KeyKind::Source`](crate::gate::KeyKind::Source) (a [`Limit`](crate::gate::Limit)'s
//! default) then charge it, and its in-flight quota and volume quota (keyed by the claim by
//! default) the claim. A client that invents claims spreads over in-flight places and volume,
//! and still pays every invented name's rate out of its one address.
//!
//! Both keys are hashed once per request. A request whose source cannot be read is a missing
//! key, as one without a claim is: the layer's
//! [`MissingKeyPolicy`](super::MissingKeyPolicy) decides, and nothing is charged; the claim
//! is never charged in the source's place.
//!
//! # The source's prefix
//!
//! [`AdmitLayerBuilder::source_prefix`](super::AdmitLayerBuilder::source_prefix) widens an
//! address source ([`IpSource`]: [`ClientIp`](super::ClientIp), [`PeerIp`](super::PeerIp)) to
//! its network prefix too ([`IpPrefix`]: a /24 and a /48 by default), and hands both to the
//! gate ([`SourceWithPrefix`]): the limits keyed by
//! [`KeyKind::SourcePrefix`](crate::gate::KeyKind::SourcePrefix) charge the prefix, so a
//! client rotating addresses inside its networks is refused at its prefixes' budget before it
//! claims an entry per address (see "When newcomers keep their budget" on [`IpPrefix`]).
//! The prefix is hashed as an identity of its own ([`IpPrefix::hashed`]), never an
//! address's. A layer without a prefix hashes none; a layer and a gate that disagree on it
//! are refused when the layer is built.

use super::key::{KeyExtractor, MissingKey};
use crate::actor::HashedActor;
use crate::prefix::IpPrefix;
use http::Request;
use std::net::IpAddr;

/// A request's source as the layer hands it to the gate: its identity hashed once, and its
/// network prefix's if the layer charges one.
///
/// ```
/// use admit::tower::Source;
/// use admit::{HashedActor, IpPrefix};
/// use std::net::IpAddr;
///
/// let ip: IpAddr = "203.0.113.9".parse()?;
/// let source = Source::new(HashedActor::new(&ip)).with_prefix(IpPrefix::default().hashed(ip));
/// assert_eq!(source.actor(), HashedActor::new(&ip));
/// assert!(source.prefix().is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    actor: HashedActor,
    prefix: Option<HashedActor>,
}

impl Source {
    /// The source `actor`, with no prefix.
    #[inline]
    pub fn new(actor: HashedActor) -> Self {
        Self {
            actor,
            prefix: None,
        }
    }

    /// With its network prefix's identity (see [`IpPrefix::hashed`]).
    #[inline]
    pub fn with_prefix(mut self, prefix: HashedActor) -> Self {
        self.prefix = Some(prefix);
        self
    }

    /// The source's identity.
    #[inline]
    pub fn actor(&self) -> HashedActor {
        self.actor
    }

    /// Its prefix's identity, if it has one.
    #[inline]
    pub fn prefix(&self) -> Option<HashedActor> {
        self.prefix
    }
}

/// Where the layer finds a request's source beside its claim: [`SameAsClaim`] (the default),
/// [`SourceFrom`] (set by [`AdmitLayerBuilder::source`](super::AdmitLayerBuilder::source)) or
/// [`SourceWithPrefix`] (and its prefix, by
/// [`AdmitLayerBuilder::source_prefix`](super::AdmitLayerBuilder::source_prefix)).
///
/// ```
/// use admit::tower::{SameAsClaim, SourceExtractor};
/// use http::Request;
///
/// // The default: no source of its own, so the claim is charged for it.
/// assert_eq!(SameAsClaim.source(&Request::new(())), Ok(None));
/// ```
pub trait SourceExtractor<B> {
    /// The request's source (and its prefix, if this extractor reads one), hashed once;
    /// `None` when the claim is the source.
    fn source(&self, request: &Request<B>) -> Result<Option<Source>, MissingKey>;
}

/// The claim is the source: every defence charges the key extractor's key (the layer's
/// default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SameAsClaim;

impl<B> SourceExtractor<B> for SameAsClaim {
    #[inline]
    fn source(&self, _: &Request<B>) -> Result<Option<Source>, MissingKey> {
        Ok(None)
    }
}

/// A source read by a key extractor of its own (see the module docs of `tower::source` and
/// [`AdmitLayerBuilder::source`](super::AdmitLayerBuilder::source)).
///
/// ```
/// use admit::tower::{PeerIp, SourceExtractor, SourceFrom};
/// use axum::extract::ConnectInfo;
/// use http::Request;
/// use std::net::SocketAddr;
///
/// let source = SourceFrom::new(PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>());
/// let mut request = Request::new(());
/// assert!(source.source(&request).is_err(), "no peer recorded: no source");
/// request.extensions_mut().insert(ConnectInfo(SocketAddr::from(([192, 0, 2, 7], 4711))));
/// assert!(source.source(&request)?.is_some_and(|source| source.prefix().is_none()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SourceFrom<Y> {
    extractor: Y,
}

impl<Y> SourceFrom<Y> {
    /// The source read by `extractor`.
    pub fn new(extractor: Y) -> Self {
        Self { extractor }
    }

    /// The source and its prefix, widened by `prefix`.
    pub fn with_prefix(self, prefix: IpPrefix) -> SourceWithPrefix<Y>
    where
        Y: IpSource,
    {
        SourceWithPrefix {
            extractor: self.extractor,
            prefix,
        }
    }
}

impl<B, Y: KeyExtractor<B>> SourceExtractor<B> for SourceFrom<Y> {
    #[inline]
    fn source(&self, request: &Request<B>) -> Result<Option<Source>, MissingKey> {
        let key = self.extractor.extract(request)?;
        Ok(Some(Source::new(HashedActor::new(&key))))
    }
}

/// A key extractor whose key is an IP address, whatever the request's body: the sources a
/// prefix can be read from ([`ClientIp`](super::ClientIp), [`PeerIp`](super::PeerIp)).
/// Implement it for an extractor of your own that yields an address.
pub trait IpSource {
    /// The address `request` is keyed by (masked as the extractor masks it: [`PeerIp`]'s
    /// IPv6 /64), or why there is none.
    ///
    /// [`PeerIp`]: super::PeerIp
    fn ip<B>(&self, request: &Request<B>) -> Result<IpAddr, MissingKey>;
}

impl IpSource for super::PeerIp {
    #[inline]
    fn ip<B>(&self, request: &Request<B>) -> Result<IpAddr, MissingKey> {
        self.extract(request)
    }
}

impl IpSource for super::ClientIp {
    #[inline]
    fn ip<B>(&self, request: &Request<B>) -> Result<IpAddr, MissingKey> {
        self.extract(request)
    }
}

/// An address source and its network prefix (see "The source's prefix" in the module docs):
/// the source is hashed as [`SourceFrom`] hashes it (the same buckets), its prefix by
/// [`IpPrefix::hashed`]. A prefix is never narrower than what the extractor keeps: behind
/// [`PeerIp`](super::PeerIp)'s IPv6 /64 a /48 is the address's /48, and an IPv6 prefix longer
/// than 64 bits is the /64.
///
/// ```
/// use admit::tower::{PeerIp, SourceExtractor, SourceFrom};
/// use admit::IpPrefix;
/// use axum::extract::ConnectInfo;
/// use http::Request;
/// use std::net::SocketAddr;
///
/// let source = SourceFrom::new(PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>())
///     .with_prefix(IpPrefix::default());
/// let from = |ip: [u8; 4]| {
///     let mut request = Request::new(());
///     request.extensions_mut().insert(ConnectInfo(SocketAddr::from((ip, 4711))));
///     source.source(&request)
/// };
/// let (Some(a), Some(b)) = (from([192, 0, 2, 7])?, from([192, 0, 2, 8])?) else {
///     return Err("an address source always has a source".into());
/// };
/// assert_ne!(a.actor(), b.actor(), "two addresses");
/// assert_eq!(a.prefix(), b.prefix(), "one /24");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SourceWithPrefix<Y> {
    extractor: Y,
    prefix: IpPrefix,
}

impl<Y> SourceWithPrefix<Y> {
    /// How far the source is widened.
    pub fn prefix(&self) -> IpPrefix {
        self.prefix
    }
}

impl<B, Y: IpSource> SourceExtractor<B> for SourceWithPrefix<Y> {
    #[inline]
    fn source(&self, request: &Request<B>) -> Result<Option<Source>, MissingKey> {
        let ip = self.extractor.ip(request)?;
        Ok(Some(
            Source::new(HashedActor::new(&ip)).with_prefix(self.prefix.hashed(ip)),
        ))
    }
}
