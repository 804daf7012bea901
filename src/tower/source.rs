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

use super::key::{KeyExtractor, MissingKey};
use crate::actor::HashedActor;
use http::Request;

/// Where the layer finds a request's source beside its claim: [`SameAsClaim`] (the default)
/// or [`SourceFrom`] (set by
/// [`AdmitLayerBuilder::source`](super::AdmitLayerBuilder::source)).
///
/// ```
/// use admit::tower::{SameAsClaim, SourceExtractor};
/// use http::Request;
///
/// // The default: no source of its own, so the claim is charged for it.
/// assert_eq!(SameAsClaim.source(&Request::new(())), Ok(None));
/// ```
pub trait SourceExtractor<B> {
    /// The request's source, hashed once; `None` when the claim is the source.
    fn source(&self, request: &Request<B>) -> Result<Option<HashedActor>, MissingKey>;
}

/// The claim is the source: every defence charges the key extractor's key (the layer's
/// default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SameAsClaim;

impl<B> SourceExtractor<B> for SameAsClaim {
    #[inline]
    fn source(&self, _: &Request<B>) -> Result<Option<HashedActor>, MissingKey> {
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
/// assert!(source.source(&request)?.is_some());
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
}

impl<B, Y: KeyExtractor<B>> SourceExtractor<B> for SourceFrom<Y> {
    #[inline]
    fn source(&self, request: &Request<B>) -> Result<Option<HashedActor>, MissingKey> {
        let key = self.extractor.extract(request)?;
        Ok(Some(HashedActor::new(&key)))
    }
}
