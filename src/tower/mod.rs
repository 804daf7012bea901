//! A tower [`Layer`] that puts the crate's defences in front of any HTTP service (feature
//! `tower`).
//!
//! [`AdmitLayer`] wraps any `Service<http::Request<B>>` (an axum `Router`, a hyper service, a
//! tonic server) and answers a request itself, before the service sees it, when one of its
//! defences refuses:
//!
//! | defence | set with | charges the request's key | refusal |
//! |---|---|---|---|
//! | keyed rate limit | [`AdmitLayerBuilder::rate_limit`] | one token of one class of a [`Limiter`] | 429, `Retry-After` = the wait |
//! | in-flight quota | [`AdmitLayerBuilder::in_flight`] | one place of a [`Quotas`], held until the response body is fully sent | 429, `Retry-After: 1` |
//! | volume quota | [`AdmitLayerBuilder::volume`] | one event of `Content-Length` bytes of a [`RateLimit`] | 429, `Retry-After` = until the window turns; 413 if larger than a window's limit |
//!
//! It is a thin layer over the primitives' public API: every decision is the primitive's own
//! `try_acquire`, and the layer adds only the HTTP (what the key is, what the answer looks
//! like). The primitives are shared: keep a clone or an `Arc` to read them, or to charge the
//! same identities from elsewhere.
//!
//! * **The key** is taken by a [`KeyExtractor`]: the peer's IP ([`PeerIp`], IPv6 masked to
//!   its /64), a header ([`HeaderKey`]), or a closure ([`KeyFn`]). A request without one is
//!   refused by default ([`MissingKeyPolicy::Refuse`]: 400, or 500 when the server records no
//!   peer address), since letting it pass would let anyone skip every defence by omitting it.
//! * **`Retry-After`** is in whole seconds, rounded up, at least 1: a 1.5 s wait says `2`,
//!   never an invitation to retry at once.
//! * **The in-flight place** lives in the response body ([`AdmitBody`]): it is freed when the
//!   body yields its last frame, fails, or is dropped (the client went away), not when the
//!   handler returns. A slow streaming response holds its place for as long as it streams; an
//!   upgraded connection (a WebSocket) holds none once the upgrade response is sent.
//! * **The volume quota is charged by the declared `Content-Length`**: a request without one
//!   (a chunked upload, a GET) is one event of 0 bytes, and a malformed one is refused with
//!   400. The layer does not count bytes as they arrive; bound chunked uploads in the service.
//! * **The order** is in-flight, then the rate limit, then the volume quota, so a refusal never
//!   keeps an in-flight place, and a request the rate limit refuses charges no volume (see
//!   the module `decide` in the source for why).
//! * **Optional IETF fields.** With [`AdmitLayerBuilder::rate_limit_headers`], every response
//!   the limiter was consulted for carries `RateLimit-Policy: "rate";q=<burst>;w=<seconds to
//!   refill the burst>` and `RateLimit: "rate";r=<tokens left>;t=<seconds until full>`
//!   (draft-ietf-httpapi-ratelimit-headers), at the cost of one more table lookup per request.
//! * **Custom refusals.** [`AdmitLayerBuilder::on_refusal`] writes the response from the typed
//!   [`AdmitRefused`]; [`AdmitRefused::to_response`] is the default to start from.
//!
//! # In front of an axum service
//!
//! ```no_run
//! use admit::fairness::Quotas;
//! use admit::tower::{AdmitLayer, PeerIp};
//! use admit::{BucketConfig, Limiter};
//! use axum::{extract::ConnectInfo, routing::get, Router};
//! use std::net::SocketAddr;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let limiter = Limiter::builder().build([BucketConfig::per_second(10)?.with_burst(20)?])?;
//! let layer = AdmitLayer::builder(PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>())
//!     .rate_limit(limiter, 0)
//!     .in_flight(Quotas::builder().quota(4).build()?)
//!     .build()?;
//! let app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod body;
mod decide;
mod key;
mod response;
mod service;
#[cfg(test)]
mod tests;

pub use body::AdmitBody;
pub use key::{HeaderKey, KeyExtractor, KeyFn, MissingKey, PeerIp};
pub use response::AdmitRefused;
pub use service::{Admit, ResponseFuture};

use crate::clock::Clock;
use crate::fairness::Quotas;
use crate::limiter::Limiter;
use crate::quota::RateLimit;
use bytes::Bytes;
use decide::{LimiterClass, Shared};
use http::Response;
use std::fmt;
use std::sync::Arc;
use tower_layer::Layer;

/// Writes the response to a refused request.
type OnRefusal = Arc<dyn Fn(&AdmitRefused) -> Response<Bytes> + Send + Sync>;

/// What the layer does with a request whose key cannot be extracted.
///
/// ```
/// use admit::tower::MissingKeyPolicy;
///
/// assert_eq!(MissingKeyPolicy::default(), MissingKeyPolicy::Refuse);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MissingKeyPolicy {
    /// Refuse it ([`AdmitRefused::MissingKey`]): 400, or 500 when the server records no peer
    /// address. The default: passing would let a client skip every defence by sending no key.
    #[default]
    Refuse,
    /// Let it through to the service unchecked and uncounted (for a key that only some routes
    /// carry, with another layer guarding the rest).
    Pass,
}

/// Why an [`AdmitLayer`] (or one of its key extractors) could not be built. Each variant
/// names the setting to change.
///
/// ```
/// use admit::tower::{AdmitConfigError, AdmitLayer, PeerIp};
///
/// let unguarded = AdmitLayer::builder(PeerIp::new()).build();
/// assert_eq!(unguarded.unwrap_err(), AdmitConfigError::NoDefence);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmitConfigError {
    /// No defence was set: the layer would only extract keys.
    NoDefence,
    /// The limiter has no such class.
    UnknownClass {
        /// The class asked for.
        class: usize,
        /// How many classes the limiter has (valid classes are `0..classes`).
        classes: usize,
    },
    /// An IPv6 prefix longer than an address.
    Ipv6PrefixTooLong {
        /// The prefix length asked for.
        bits: u8,
    },
}

impl fmt::Display for AdmitConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDefence => f.write_str(
                "no defence set: give the layer a `rate_limit`, an `in_flight` quota or a \
                 `volume` quota",
            ),
            Self::UnknownClass { class, classes } => write!(
                f,
                "`rate_limit` class {class} does not exist: the limiter has {classes} classes \
                 (0..{classes})"
            ),
            Self::Ipv6PrefixTooLong { bits } => write!(
                f,
                "`ipv6_prefix` is {bits} bits; an IPv6 address has 128 (the default is 64)"
            ),
        }
    }
}

impl std::error::Error for AdmitConfigError {}

/// Puts the configured defences in front of a service: [`AdmitLayer::builder`] with a key
/// extractor, then any of [`rate_limit`](AdmitLayerBuilder::rate_limit),
/// [`in_flight`](AdmitLayerBuilder::in_flight) and [`volume`](AdmitLayerBuilder::volume).
/// Cloning it is cheap, and every clone and every service it makes share the primitives.
///
/// ```
/// use admit::tower::{AdmitLayer, HeaderKey};
/// use admit::{BucketConfig, Limiter};
/// use axum::{body::Body, routing::get, Router};
/// use http::{HeaderName, Request, StatusCode};
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let limiter = Limiter::builder().build([BucketConfig::per_minute(60)?.with_burst(1)?])?;
/// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
///     .rate_limit(limiter, 0)
///     .build()?;
/// let mut app = layer.layer(Router::new().route("/", get(|| async { "hello" })));
/// let request = || Request::get("/").header("x-api-key", "k-1").body(Body::empty());
/// assert_eq!(app.call(request()?).await?.status(), StatusCode::OK);
/// let refused = app.call(request()?).await?;
/// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(refused.headers()["retry-after"], "1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AdmitLayer<X> {
    shared: Arc<Shared<X>>,
}

impl<X> AdmitLayer<X> {
    /// A builder keying requests with `key`.
    pub fn builder(key: X) -> AdmitLayerBuilder<X> {
        AdmitLayerBuilder {
            shared: Shared {
                key,
                in_flight: None,
                rate: None,
                volume: None,
                missing_key: MissingKeyPolicy::default(),
                rate_limit_headers: false,
                on_refusal: None,
            },
            error: None,
        }
    }
}

impl<X> Clone for AdmitLayer<X> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S, X> Layer<S> for AdmitLayer<X> {
    type Service = Admit<S, X>;

    fn layer(&self, inner: S) -> Admit<S, X> {
        Admit::new(inner, Arc::clone(&self.shared))
    }
}

impl<X: fmt::Debug> fmt::Debug for AdmitLayer<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl<X: fmt::Debug> fmt::Debug for Shared<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitLayer")
            .field("key", &self.key)
            .field("rate_limit", &self.rate.is_some())
            .field("in_flight", &self.in_flight.is_some())
            .field("volume", &self.volume.is_some())
            .field("missing_key", &self.missing_key)
            .field("rate_limit_headers", &self.rate_limit_headers)
            .field("on_refusal", &self.on_refusal.is_some())
            .finish()
    }
}

/// Builds an [`AdmitLayer`]. Each defence is optional, and at least one is required; setting
/// one twice keeps the second (stack two layers to charge two limiter classes).
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::quota::{Quota, RateLimit};
/// use admit::tower::{AdmitLayer, MissingKeyPolicy, PeerIp};
/// use admit::{BucketConfig, Limiter};
/// use std::time::Duration;
///
/// let layer = AdmitLayer::builder(PeerIp::new().ipv6_prefix(56)?)
///     .rate_limit(Limiter::builder().build([BucketConfig::per_second(5)?.with_burst(10)?])?, 0)
///     .in_flight(Quotas::builder().quota(8).build()?)
///     .volume(RateLimit::new(Quota::new(600, 4 << 20, Duration::from_secs(60))?))
///     .missing_key(MissingKeyPolicy::Refuse)
///     .rate_limit_headers(true)
///     .build()?;
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub struct AdmitLayerBuilder<X> {
    shared: Shared<X>,
    /// The first invalid setting, reported by `build`.
    error: Option<AdmitConfigError>,
}

impl<X> AdmitLayerBuilder<X> {
    /// Charges one token of `class` of `limiter` per request (a `Limiter` or an
    /// `Arc<Limiter>` shared with other code).
    pub fn rate_limit<C>(mut self, limiter: impl Into<Arc<Limiter<C>>>, class: usize) -> Self
    where
        C: Clock + Send + Sync + 'static,
    {
        let limiter = limiter.into();
        let classes = limiter.classes();
        if class >= classes {
            self.error
                .get_or_insert(AdmitConfigError::UnknownClass { class, classes });
        }
        self.shared.rate = Some(Box::new(LimiterClass { limiter, class }));
        self
    }

    /// Holds one place of `quotas` per request until its response body is fully sent.
    pub fn in_flight(mut self, quotas: Quotas) -> Self {
        self.shared.in_flight = Some(quotas);
        self
    }

    /// Charges one event of `Content-Length` bytes (0 without the header) to `limit` per
    /// request (a `RateLimit` or an `Arc<RateLimit>` shared with other code).
    pub fn volume<C>(mut self, limit: impl Into<Arc<RateLimit<C>>>) -> Self
    where
        C: Clock + Send + Sync + 'static,
    {
        self.shared.volume = Some(Box::new(limit.into()));
        self
    }

    /// What to do with a request that has no key ([`MissingKeyPolicy::Refuse`] by default).
    pub fn missing_key(mut self, policy: MissingKeyPolicy) -> Self {
        self.shared.missing_key = policy;
        self
    }

    /// Adds the IETF `RateLimit-Policy` and `RateLimit` fields to every response the rate
    /// limit was consulted for, refusals included (off by default).
    pub fn rate_limit_headers(mut self, on: bool) -> Self {
        self.shared.rate_limit_headers = on;
        self
    }

    /// Writes refusals with `respond` instead of [`AdmitRefused::to_response`]. The layer
    /// still adds the rate-limit fields (if on) and the refusal to the response's extensions.
    ///
    /// ```
    /// use admit::tower::{AdmitLayer, AdmitRefused, PeerIp};
    /// use admit::fairness::Quotas;
    /// use http::StatusCode;
    ///
    /// let layer = AdmitLayer::builder(PeerIp::new())
    ///     .in_flight(Quotas::new())
    ///     .on_refusal(|refused: &AdmitRefused| {
    ///         let mut response = refused.to_response();
    ///         if refused.status() == StatusCode::TOO_MANY_REQUESTS {
    ///             *response.body_mut() = r#"{"error":"slow down"}"#.into();
    ///         }
    ///         response
    ///     })
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_refusal<F>(mut self, respond: F) -> Self
    where
        F: Fn(&AdmitRefused) -> Response<Bytes> + Send + Sync + 'static,
    {
        self.shared.on_refusal = Some(Arc::new(respond));
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<AdmitLayer<X>, AdmitConfigError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let shared = self.shared;
        if shared.rate.is_none() && shared.in_flight.is_none() && shared.volume.is_none() {
            return Err(AdmitConfigError::NoDefence);
        }
        Ok(AdmitLayer {
            shared: Arc::new(shared),
        })
    }
}

impl<X: fmt::Debug> fmt::Debug for AdmitLayerBuilder<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}
