//! A layer of rate limits alone ([`RateLayer`]): each request's key charged one or more keyed
//! rate limits, all or nothing, and the request passed on untouched.
//!
//! # When to choose it over [`AdmitLayer`](super::AdmitLayer)
//!
//! [`RateLayer`] is for a service that wants keyed rate limits and nothing else, what a
//! tower_governor user wants. It charges the limits of a [`Gate`] that has rate limits only,
//! through the gate's own admission (so the order and the rollback are the gate's), and adds
//! nothing to the request or the response:
//!
//! * **the request** reaches the inner service unchanged (its body is not re-typed or
//!   metered);
//! * **the response** is the inner service's, unchanged (its body is not wrapped: nothing is
//!   held until the last byte);
//! * **the future** is the inner service's, inside a two-variant enum.
//!
//! It does **not** do what needs the request or the response held: in-flight places (held
//! until the response body's last byte), the volume quota (bytes counted as the body
//! arrives), limits charged by outcome (the response's status), per-route rules, a source
//! read apart from the key, priority classes, or the IETF `RateLimit` fields. For any of
//! those, use [`AdmitLayer`](super::AdmitLayer), which costs a few hundred instructions more a
//! request for them.
//!
//! # What it does
//!
//! 1. **The key**: the same [`KeyExtractor`]s as [`AdmitLayer`](super::AdmitLayer)
//!    ([`PeerIp`](super::PeerIp), [`ClientIp`](super::ClientIp),
//!    [`HeaderKey`](super::HeaderKey), [`KeyFn`](super::KeyFn)), hashed once per request
//!    ([`HashedActor::new`], as every primitive hashes the same identity, so code beside the
//!    layer charging the same identity shares its buckets). A request without one is refused
//!    (400, or 500 without a peer address) or passed, as its [`MissingKeyPolicy`] says.
//! 2. **The limits**, in the order given ([`RateLayerBuilder::rates`], or a gate of rate
//!    limits alone a [`LiveLimits`](crate::live::LiveLimits) built, [`RateLayerBuilder::gate`],
//!    whose reloads the layer follows), every one charged to the key, all or nothing: a
//!    limit that refuses gives back what the ones before it took, as the gate does (see
//!    "Rollback" in [`crate::gate`]: exact, or void when another request of the same key
//!    landed between the take and the give-back; never more than was taken). A limiter class
//!    in [shadow mode](crate::shadow) admits what it would refuse, and counts it.
//! 3. **The answer**: admitted, the inner service's future; refused, at once, the refusal
//!    [`AdmitLayer`](super::AdmitLayer) writes ([`AdmitRefused::to_response`]: 429 with
//!    `Retry-After`, the wait in whole seconds rounded up; to a gRPC request,
//!    [`AdmitRefused::to_grpc_response`]), or the layer's own
//!    ([`RateLayerBuilder::on_refusal`]), with the [`AdmitRefused`] in its extensions.
//!
//! # The response body
//!
//! The refusal is written as [`Bytes`] and handed to the service's response body type by
//! `From<Bytes>`, as the layer's service answers with the inner service's own response type:
//! axum's `Body`, `http_body_util::Full<Bytes>` and hyper's usual bodies take it. Wrapping
//! every response in a body of the layer's own (an `Either` of the inner body and the refusal)
//! would accept any body, at the price of a move and a branch on every admitted response and
//! every frame of its body. A service whose body cannot be made from `Bytes` (tonic's) takes
//! [`AdmitLayer`](super::AdmitLayer), whose body wraps the service's.

use super::key::KeyExtractor;
use super::response::{answer, is_grpc, AdmitRefused};
use super::{MissingKeyPolicy, OnRefusal};
use crate::actor::HashedActor;
use crate::clock::{Clock, RecentClock};
use crate::gate::{Admission, Gate, GateConfigError, KeyKind, Limit};
use crate::limiter::Limiter;
use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_layer::Layer;
use tower_service::Service;

/// Rate limits alone in front of a service: [`RateLayer::builder`] with a key extractor, then
/// one or more limits ([`RateLayerBuilder::rate`], [`RateLayerBuilder::rates`]). Admitted
/// requests reach the service unchanged; refused ones are answered at once. See the
/// [module docs](self) for what it does and what it leaves to
/// [`AdmitLayer`](super::AdmitLayer). Cloning it is cheap, and every clone and every service
/// it makes share the limits.
///
/// ```
/// use admit::tower::{HeaderKey, RateLayer};
/// use admit::{BucketConfig, Limiter};
/// use axum::{body::Body, routing::get, Router};
/// use http::{HeaderName, Request, StatusCode};
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let limiter = Limiter::builder().build([BucketConfig::per_minute(60)?.with_burst(1)?])?;
/// let layer = RateLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
///     .rate(limiter, 0)
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
pub struct RateLayer<X, C: Clock + 'static = RecentClock> {
    shared: Arc<Shared<X, C>>,
}

/// Everything the layer decides with, shared by every clone of the layer and its services.
struct Shared<X, C: Clock + 'static> {
    key: X,
    /// A gate of rate limits alone (checked when built).
    gate: Gate<C>,
    missing_key: MissingKeyPolicy,
    on_refusal: Option<OnRefusal>,
}

impl<X, C: Clock + 'static> RateLayer<X, C> {
    /// A builder keying requests with `key`. The clock type is the limiters' (inferred from
    /// the first limit given).
    pub fn builder(key: X) -> RateLayerBuilder<X, C> {
        RateLayerBuilder {
            key,
            gate: Ok(Gate::new()),
            missing_key: MissingKeyPolicy::default(),
            on_refusal: None,
        }
    }

    /// The gate of the layer's limits: read their limiters ([`Gate::limits`]), or charge the
    /// same identities from elsewhere.
    pub fn gate(&self) -> &Gate<C> {
        &self.shared.gate
    }
}

impl<X, C: Clock + 'static> Clone for RateLayer<X, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S, X, C: Clock + 'static> Layer<S> for RateLayer<X, C> {
    type Service = Rated<S, X, C>;

    fn layer(&self, inner: S) -> Rated<S, X, C> {
        Rated {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<X: fmt::Debug, C: Clock + 'static> fmt::Debug for RateLayer<X, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl<X: fmt::Debug, C: Clock + 'static> fmt::Debug for Shared<X, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limits: Vec<&str> = self.gate.limits().map(|(_, limit)| limit.name()).collect();
        f.debug_struct("RateLayer")
            .field("key", &self.key)
            .field("limits", &limits)
            .field("missing_key", &self.missing_key)
            .field("on_refusal", &self.on_refusal.is_some())
            .finish()
    }
}

impl<X, C: Clock + Send + Sync + 'static> Shared<X, C> {
    /// Admits `request` by every limit, all or none, or says why not.
    #[inline]
    fn decide<B>(&self, request: &Request<B>) -> Result<(), AdmitRefused>
    where
        X: KeyExtractor<B>,
    {
        match self.key.extract(request) {
            Ok(key) => {
                let admission = Admission::hashed_one(HashedActor::new(&key));
                // No pass to keep: the gate has no in-flight quota.
                self.gate
                    .try_admit_passless_at(&admission, self.gate.now_ns())
                    .map_err(AdmitRefused::from)
            }
            Err(_) if self.missing_key == MissingKeyPolicy::Pass => Ok(()),
            Err(missing) => Err(AdmitRefused::MissingKey(missing)),
        }
    }

    /// The answer to a refused request, with the refusal in its extensions. Out of line: the
    /// admitted path does not carry it.
    #[cold]
    #[inline(never)]
    fn refusal(&self, refused: AdmitRefused, grpc: bool) -> Response<Bytes> {
        let mut response = answer(self.on_refusal.as_ref(), &refused, grpc);
        response.extensions_mut().insert(refused);
        response
    }
}

/// Builds a [`RateLayer`]: a key extractor, one or more limits, and the options.
///
/// ```
/// use admit::gate::Limit;
/// use admit::tower::{MissingKeyPolicy, PeerIp, RateLayer};
/// use admit::{BucketConfig, Limiter};
///
/// // 10 a second in bursts of 20, and 10,000 a day, per address: both or neither.
/// let limiter = Limiter::builder()
///     .build([BucketConfig::per_second(10)?.with_burst(20)?, BucketConfig::per_day(10_000)?])?;
/// let layer = RateLayer::builder(PeerIp::new())
///     .rates(limiter, [Limit::new("burst", 0), Limit::new("daily", 1)])
///     .missing_key(MissingKeyPolicy::Refuse)
///     .build()?;
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub struct RateLayerBuilder<X, C: Clock + 'static = RecentClock> {
    key: X,
    /// The limits so far, or the first refusal of one.
    gate: Result<Gate<C>, RateConfigError>,
    missing_key: MissingKeyPolicy,
    on_refusal: Option<OnRefusal>,
}

impl<X, C: Clock + 'static> RateLayerBuilder<X, C> {
    /// Adds one limit: one token of `class` of `limiter` a request, named `"rate"` in
    /// refusals (a second [`rate`](Self::rate) is refused as a duplicate name: name them with
    /// [`rates`](Self::rates)).
    pub fn rate(self, limiter: Limiter<C>, class: usize) -> Self {
        self.rates(limiter, [Limit::new("rate", class)])
    }

    /// Adds `limits`, classes of `limiter`, every one charged to each request's key after the
    /// limits added before, all or nothing. The checks are [`Gate::rates`]'s (a class the
    /// limiter lacks, a fixed cost above its burst, a name given twice, more than
    /// [`MAX_LIMITS`](crate::gate::MAX_LIMITS)) plus the layer's own: a limit charged by
    /// outcome, or keyed by the source's prefix, needs [`AdmitLayer`](super::AdmitLayer). A
    /// limit's [`KeyKind::Claim`] and [`KeyKind::Source`] are both the layer's one key. The
    /// first refusal is reported by [`build`](Self::build).
    ///
    /// ```
    /// use admit::gate::{Cost, Limit};
    /// use admit::tower::{HeaderKey, RateConfigError, RateLayer};
    /// use admit::{BucketConfig, Limiter};
    /// use http::HeaderName;
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_second(5)?])?;
    /// let refused = RateLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
    ///     .rates(limiter, [Limit::new("bulk", 0).cost(Cost::Tokens(6))])
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(refused, RateConfigError::Limits(_)));
    /// assert!(refused.to_string().contains("\"bulk\""));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rates(mut self, limiter: Limiter<C>, limits: impl IntoIterator<Item = Limit>) -> Self {
        self.gate = self.gate.and_then(|gate| {
            let limits: Vec<Limit> = limits.into_iter().collect();
            limits.iter().try_for_each(carried)?;
            gate.rates(limiter, limits).map_err(RateConfigError::Limits)
        });
        self
    }

    /// Charges the rate limits of `gate` in place of any given before (later
    /// [`rates`](Self::rates) calls add theirs after them): a gate a
    /// [`LiveLimits`](crate::live::LiveLimits) built over its running limiter, so a reload
    /// changes the limits' rates, bursts and costs while the layer admits. Refused if the
    /// gate has an in-flight or a volume quota ([`RateConfigError::NotRatesAlone`]), or a limit
    /// this layer cannot charge (as [`rates`](Self::rates) says).
    ///
    /// ```
    /// # #[cfg(feature = "config")]
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use admit::live::LiveLimits;
    /// use admit::tower::{HeaderKey, RateLayer};
    /// use http::HeaderName;
    ///
    /// let live = LiveLimits::from_toml_str(
    ///     "[[admit.limit]]\nname = \"per key\"\nkey = \"claim\"\nrate = \"10/s\"\nburst = 20\n",
    /// )?;
    /// let layer = RateLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
    ///     .gate(live.gate()?)
    ///     .build()?;
    /// // Later, `live.reload(path)` changes the rate the layer charges.
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// # #[cfg(not(feature = "config"))]
    /// # fn main() {}
    /// ```
    pub fn gate(mut self, gate: Gate<C>) -> Self {
        self.gate = self.gate.and_then(|_| {
            let alone = [
                (gate.in_flight_slot().is_some(), "in-flight quota"),
                (gate.volume_quota().is_some(), "volume quota"),
            ];
            if let Some(&(_, defence)) = alone.iter().find(|(has, _)| *has) {
                return Err(RateConfigError::NotRatesAlone { defence });
            }
            gate.limits().try_for_each(|(_, limit)| carried(limit))?;
            Ok(gate)
        });
        self
    }

    /// What to do with a request that has no key ([`MissingKeyPolicy::Refuse`] by default:
    /// passing would let a client skip every limit by sending none).
    pub fn missing_key(mut self, policy: MissingKeyPolicy) -> Self {
        self.missing_key = policy;
        self
    }

    /// Writes refusals with `respond` instead of [`AdmitRefused::to_response`] (and
    /// [`AdmitRefused::to_grpc_response`]); the layer adds the refusal to the response's
    /// extensions.
    ///
    /// ```
    /// use admit::tower::{AdmitRefused, PeerIp, RateLayer};
    /// use admit::{BucketConfig, Limiter};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_second(5)?])?;
    /// let layer = RateLayer::builder(PeerIp::new())
    ///     .rate(limiter, 0)
    ///     .on_refusal(|refused: &AdmitRefused| {
    ///         let mut response = refused.to_response();
    ///         *response.body_mut() = r#"{"error":"slow down"}"#.into();
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
        self.on_refusal = Some(Arc::new(respond));
        self
    }

    /// Validates and builds: the first refusal of [`rates`](Self::rates) or
    /// [`gate`](Self::gate), no limit at all
    /// ([`RateConfigError::NoLimit`]), or limiters whose clocks are apart
    /// ([`RateConfigError::ClocksApart`]: the first limiter's reading is handed to all).
    ///
    /// ```
    /// use admit::tower::{PeerIp, RateConfigError, RateLayer};
    ///
    /// let unguarded = RateLayer::<PeerIp>::builder(PeerIp::new()).build();
    /// assert_eq!(unguarded.unwrap_err(), RateConfigError::NoLimit);
    /// ```
    pub fn build(self) -> Result<RateLayer<X, C>, RateConfigError> {
        let gate = self.gate?;
        if gate.limits().next().is_none() {
            return Err(RateConfigError::NoLimit);
        }
        gate.check_clocks()
            .map_err(|ahead| RateConfigError::ClocksApart {
                ahead_by: ahead.ahead_by(),
            })?;
        Ok(RateLayer {
            shared: Arc::new(Shared {
                key: self.key,
                gate,
                missing_key: self.missing_key,
                on_refusal: self.on_refusal,
            }),
        })
    }
}

/// Whether the layer can charge `limit`: not by outcome (it never sees the response), not by
/// the source's prefix (it reads one key).
fn carried(limit: &Limit) -> Result<(), RateConfigError> {
    if limit.is_by_outcome() {
        return Err(RateConfigError::ByOutcome {
            limit: Arc::from(limit.name()),
        });
    }
    if limit.key_kind() == KeyKind::SourcePrefix {
        return Err(RateConfigError::KeyedBySourcePrefix {
            limit: Arc::from(limit.name()),
        });
    }
    Ok(())
}

impl<X: fmt::Debug, C: Clock + 'static> fmt::Debug for RateLayerBuilder<X, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limits: Result<Vec<&str>, &RateConfigError> = self
            .gate
            .as_ref()
            .map(|gate| gate.limits().map(|(_, limit)| limit.name()).collect());
        f.debug_struct("RateLayerBuilder")
            .field("key", &self.key)
            .field("limits", &limits)
            .field("missing_key", &self.missing_key)
            .field("on_refusal", &self.on_refusal.is_some())
            .finish()
    }
}

/// Why a [`RateLayer`] could not be built. Each variant names what to change.
///
/// ```
/// use admit::gate::{KeyKind, Limit};
/// use admit::tower::{PeerIp, RateConfigError, RateLayer};
/// use admit::{BucketConfig, Limiter};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_minute(5)?])?;
/// let refused = RateLayer::builder(PeerIp::new())
///     .rates(limiter, [Limit::new("failed logins", 0).by_outcome()])
///     .build()
///     .unwrap_err();
/// assert!(matches!(&refused, RateConfigError::ByOutcome { limit } if &**limit == "failed logins"));
/// assert!(refused.to_string().contains("AdmitLayer"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateConfigError {
    /// No limit was given: the layer would only extract keys.
    NoLimit,
    /// [`Gate::rates`] refused a limiter's limits (a class it lacks, a cost above the burst,
    /// a name given twice, too many limits).
    Limits(GateConfigError),
    /// The gate handed to [`RateLayerBuilder::gate`] has a defence besides rate limits,
    /// which this layer does not hold (that is [`AdmitLayer`](super::AdmitLayer)'s).
    NotRatesAlone {
        /// The defence: "in-flight quota" or "volume quota".
        defence: &'static str,
    },
    /// A limit is charged by outcome ([`Limit::by_outcome`]): the layer never sees the
    /// response's status (that is [`AdmitLayer`](super::AdmitLayer)'s
    /// `charge_outcome_when`).
    ByOutcome {
        /// The limit.
        limit: Arc<str>,
    },
    /// A limit is keyed by the source's prefix ([`KeyKind::SourcePrefix`]): the layer reads
    /// one key and no prefix (that is [`AdmitLayer`](super::AdmitLayer)'s `source_prefix`).
    KeyedBySourcePrefix {
        /// The limit.
        limit: Arc<str>,
    },
    /// A later limiter reads a clock the first one's is ahead of, which would refuse every
    /// reading the layer hands it (see [`Gate::check_clocks`]).
    ClocksApart {
        /// How far the first limiter's clock is ahead.
        ahead_by: Duration,
    },
}

impl fmt::Display for RateConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoLimit => f.write_str(
                "no limit given: add one with `rate` or `rates` (for in-flight or volume \
                 quotas alone, use `AdmitLayer`)",
            ),
            Self::Limits(refused) => refused.fmt(f),
            Self::NotRatesAlone { defence } => write!(
                f,
                "the gate has a {defence}, which a `RateLayer` does not hold (it passes the \
                 response through and never sees its end): use `AdmitLayer`, or a gate of \
                 rate limits alone"
            ),
            Self::ByOutcome { limit } => write!(
                f,
                "limit \"{limit}\" is charged by outcome, but a `RateLayer` never sees the \
                 response: use `AdmitLayer` with `charge_outcome_when`"
            ),
            Self::KeyedBySourcePrefix { limit } => write!(
                f,
                "limit \"{limit}\" is keyed by the source's prefix, which a `RateLayer` does \
                 not read: key it by the claim or the source, or use `AdmitLayer` with \
                 `source_prefix`"
            ),
            Self::ClocksApart { ahead_by } => write!(
                f,
                "the first limiter reads a clock {ahead_by:?} ahead of a later one's, which \
                 would refuse every reading of it: build every limiter over one clock"
            ),
        }
    }
}

impl std::error::Error for RateConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Limits(refused) => Some(refused),
            _ => None,
        }
    }
}

/// A service behind a [`RateLayer`]'s limits: each request is decided before the service sees
/// it; admitted, it is passed on unchanged and the service's own future returned; refused,
/// it is answered at once.
///
/// ```
/// use admit::tower::{KeyFn, RateLayer, Rated};
/// use admit::{BucketConfig, Limiter};
/// use bytes::Bytes;
/// use http::{Request, Response, StatusCode};
/// use http_body_util::Full;
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// // Any tower service of http requests whose body can be made from `Bytes`; the request
/// // reaches it as it came (here a `Request<()>`).
/// let hello = tower::service_fn(|_: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("hello"))))
/// });
/// let limiter = Limiter::builder().build([BucketConfig::per_minute(1)?])?;
/// let layer = RateLayer::builder(KeyFn::new(|r: &Request<()>| r.uri().query().map(str::to_owned)))
///     .rate(limiter, 0)
///     .build()?;
/// let mut service: Rated<_, _> = layer.layer(hello);
/// assert_eq!(service.call(Request::get("/?user=7").body(())?).await?.status(), StatusCode::OK);
/// let refused = service.call(Request::get("/?user=7").body(())?).await?;
/// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
/// let no_key = service.call(Request::get("/").body(())?).await?;
/// assert_eq!(no_key.status(), StatusCode::BAD_REQUEST);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Rated<S, X, C: Clock + 'static = RecentClock> {
    inner: S,
    shared: Arc<Shared<X, C>>,
}

impl<S, X, C: Clock + 'static> Rated<S, X, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, X, C: Clock + 'static> Clone for Rated<S, X, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, X: fmt::Debug, C: Clock + 'static> fmt::Debug for Rated<S, X, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rated")
            .field("inner", &self.inner)
            .field("layer", &self.shared)
            .finish()
    }
}

impl<S, X, C, ReqBody, ResBody> Service<Request<ReqBody>> for Rated<S, X, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: From<Bytes>,
    X: KeyExtractor<ReqBody>,
    C: Clock + Send + Sync + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RatedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let kind = match self.shared.decide(&request) {
            Ok(()) => Kind::Admitted {
                future: self.inner.call(request),
            },
            Err(refused) => Kind::Refused {
                response: Some(self.shared.refusal(refused, is_grpc(request.headers()))),
            },
        };
        RatedFuture { kind }
    }
}

pin_project! {
    /// The future of a [`Rated`] service's response: the inner service's own, or a refusal
    /// ready at once.
    ///
    /// ```
    /// use admit::tower::{KeyFn, RateLayer, RatedFuture};
    /// use admit::{BucketConfig, Limiter};
    /// use bytes::Bytes;
    /// use http::{Request, Response};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// // The response body is one a refusal can be made of (`From<Bytes>`).
    /// let echo = tower::service_fn(|r: Request<String>| async move {
    ///     Ok::<_, std::convert::Infallible>(Response::new(Bytes::from(r.into_body())))
    /// });
    /// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?])?;
    /// let layer = RateLayer::builder(KeyFn::new(|_: &Request<String>| Some("everyone")))
    ///     .rate(limiter, 0)
    ///     .build()?;
    /// let future: RatedFuture<_> = layer.layer(echo).call(Request::new("hi".to_owned()));
    /// assert_eq!(future.await?.into_body(), "hi", "the request and the response, unchanged");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub struct RatedFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Admitted {
            #[pin]
            future: F,
        },
        Refused {
            response: Option<Response<Bytes>>,
        },
    }
}

impl<F> fmt::Debug for RatedFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Admitted { .. } => "admitted",
            Kind::Refused { .. } => "refused",
        };
        f.debug_struct("RatedFuture").field("kind", &kind).finish()
    }
}

impl<F, B, E> Future for RatedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: From<Bytes>,
{
    type Output = Result<Response<B>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Admitted { future } => future.poll(cx),
            KindProj::Refused { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response.map(B::from))),
                // Polled again after it completed: a future may do anything then, and this
                // one, which must not panic, never completes again.
                None => Poll::Pending,
            },
        }
    }
}
