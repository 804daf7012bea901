//! The services of the tower layer bench (`benches/tower.rs`, which describes them): a no-op
//! service, admit's layer and tower_governor's, keyed by one request header, and the requests
//! they serve; the instruction bench (`benches/instructions.rs`) reuses them, and adds the
//! client behind one proxy: admit's layer keyed by `ClientIp`, tower_governor's by its
//! `SmartIpKeyExtractor`, both reading the one forwarded hop of the same requests. A directory
//! module, so that Cargo does not take it for a bench.

use admit::gate::Gate;
use admit::tower::{AdmitLayer, ClientIp, HeaderKey, RateLayer, Routes, Rule};
use admit::{BucketConfig, Clock, Limiter};
use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{HeaderName, HeaderValue, Method, Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tower::Service;
use tower_governor::governor::{GovernorConfig, GovernorConfigBuilder};
use tower_governor::key_extractor::{KeyExtractor, SmartIpKeyExtractor};
use tower_governor::{GovernorError, GovernorLayer};

pub const KEY_HEADER: &str = "x-client";
/// A burst no run exhausts, one token back per millisecond: every request is admitted.
pub const BURST: u32 = 1_000_000_000;

/// The request header as tower_governor's key (a cheap clone of shared bytes, as admit's
/// `HeaderKey` reads it without copying).
#[derive(Clone)]
pub struct Header;

impl KeyExtractor for Header {
    type Key = HeaderValue;

    fn extract<T>(&self, req: &Request<T>) -> Result<Self::Key, GovernorError> {
        req.headers()
            .get(KEY_HEADER)
            .cloned()
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

pub async fn ok<B>(_: Request<B>) -> Result<Response<Body>, Infallible> {
    Ok(Response::new(Body::empty()))
}

/// Polls a future that is ready at once.
pub fn now<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("every service here answers at once"),
    }
}

pub fn serve<S>(service: &mut S, request: Request<Body>) -> S::Response
where
    S: Service<Request<Body>>,
    S::Error: std::fmt::Debug,
{
    now(std::future::poll_fn(|cx| service.poll_ready(cx))).unwrap();
    now(service.call(request)).unwrap()
}

pub fn requests(keys: &[HeaderValue], n: usize) -> Vec<Request<Body>> {
    keys.iter()
        .cycle()
        .take(n)
        .map(|key| {
            Request::builder()
                .header(KEY_HEADER, key.clone())
                .body(Body::empty())
                .unwrap()
        })
        .collect()
}

/// `n` requests from the balancer at 10.0.0.1 (its address recorded as axum's
/// `ConnectInfo`), each carrying the one hop it appended: `X-Forwarded-For: 203.0.113.7`.
pub fn forwarded_requests(n: usize) -> Vec<Request<Body>> {
    let balancer = ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 40_000)));
    (0..n)
        .map(|_| {
            Request::builder()
                .header("x-forwarded-for", "203.0.113.7")
                .extension(balancer)
                .body(Body::empty())
                .unwrap()
        })
        .collect()
}

/// The keyed limiter alone (cap 16,384) on `clock`, admitting every request.
fn gate<C: Clock>(clock: C) -> Gate<C> {
    Gate::new().rate(limiter(clock), 0)
}

/// The keyed limiter of [`gate`], for the rate-limit layer.
fn limiter<C: Clock>(clock: C) -> Limiter<C> {
    Limiter::builder()
        .cap(16_384)
        .build_with_clock(
            [BucketConfig::new(BURST, Duration::from_millis(1)).unwrap()],
            clock,
        )
        .unwrap()
}

/// admit's rate-limit layer ([`RateLayer`]): the same keyed limiter as [`admit_layer`]'s gate,
/// with nothing else (no body wrapped, the inner future returned as it is).
pub fn rate_layer<C: Clock>(clock: C) -> RateLayer<HeaderKey, C> {
    RateLayer::builder(HeaderKey::new(HeaderName::from_static(KEY_HEADER)))
        .rate(limiter(clock), 0)
        .build()
        .unwrap()
}

/// [`rate_layer`] keyed by [`client_ip`].
pub fn rate_client_ip_layer<C: Clock>(clock: C) -> RateLayer<ClientIp, C> {
    RateLayer::builder(client_ip())
        .rate(limiter(clock), 0)
        .build()
        .unwrap()
}

/// admit's layer: a gate holding the keyed limiter alone (cap 16,384) on `clock`.
pub fn admit_layer<C: Clock>(clock: C) -> AdmitLayer<HeaderKey, C> {
    AdmitLayer::builder(HeaderKey::new(HeaderName::from_static(KEY_HEADER)))
        .gate(gate(clock))
        .build()
        .unwrap()
}

/// [`admit_layer`] with the IETF `RateLimit-Policy` / `RateLimit` fields on every response.
pub fn admit_fields_layer<C: Clock>(clock: C) -> AdmitLayer<HeaderKey, C> {
    AdmitLayer::builder(HeaderKey::new(HeaderName::from_static(KEY_HEADER)))
        .gate(gate(clock))
        .rate_limit_headers(true)
        .build()
        .unwrap()
}

/// admit's layer with one route rule (`POST /login`, a gate of its own) that the bench's
/// requests (`GET /`) do not match: each is admitted by the default rule, [`gate`]. What a
/// layer with rules adds to a request: the rule tried, the weight set.
pub fn admit_routes_layer<C: Clock + Clone>(clock: C) -> AdmitLayer<HeaderKey, C> {
    let routes = Routes::new(gate(clock.clone()))
        .unwrap()
        .rule(Rule::exact("/login").method(Method::POST), gate(clock))
        .unwrap();
    AdmitLayer::builder(HeaderKey::new(HeaderName::from_static(KEY_HEADER)))
        .routes(routes)
        .build()
        .unwrap()
}

/// The client behind the trusted balancer (`10.0.0.0/8`), its address read from axum's
/// `ConnectInfo`.
pub fn client_ip() -> ClientIp {
    ClientIp::x_forwarded_for()
        .trust("10.0.0.0/8")
        .unwrap()
        .from_extension::<ConnectInfo<SocketAddr>>()
}

/// admit's layer keyed by [`client_ip`].
pub fn admit_client_ip_layer<C: Clock>(clock: C) -> AdmitLayer<ClientIp, C> {
    AdmitLayer::builder(client_ip())
        .gate(gate(clock))
        .build()
        .unwrap()
}

/// tower_governor's layer, configured to the same limit.
pub fn governor_layer() -> GovernorLayer<Header, governor::middleware::NoOpMiddleware, Body> {
    governor_layer_keyed(Header)
}

/// [`governor_layer`] writing its `x-ratelimit-*` headers on every response (`use_headers`).
pub fn governor_headers_layer(
) -> GovernorLayer<Header, governor::middleware::StateInformationMiddleware, Body> {
    let config = GovernorConfigBuilder::default()
        .per_millisecond(1)
        .burst_size(BURST)
        .key_extractor(Header)
        .use_headers()
        .finish()
        .unwrap();
    GovernorLayer::new(config)
}

/// tower_governor's layer keyed by its `SmartIpKeyExtractor` (the leftmost
/// `X-Forwarded-For` entry), configured to the same limit.
pub fn governor_smart_layer(
) -> GovernorLayer<SmartIpKeyExtractor, governor::middleware::NoOpMiddleware, Body> {
    governor_layer_keyed(SmartIpKeyExtractor)
}

fn governor_layer_keyed<K: KeyExtractor>(
    key: K,
) -> GovernorLayer<K, governor::middleware::NoOpMiddleware, Body> {
    let config: GovernorConfig<K, _> = GovernorConfigBuilder::default()
        .per_millisecond(1)
        .burst_size(BURST)
        .key_extractor(key)
        .finish()
        .unwrap();
    GovernorLayer::new(config)
}
