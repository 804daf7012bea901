//! The services of the tower layer bench (`benches/tower.rs`, which describes them): a no-op
//! service, admit's layer and tower_governor's, keyed by one request header, and the requests
//! they serve; the instruction bench (`benches/instructions.rs`) reuses them. A directory
//! module, so that Cargo does not take it for a bench.

use admit::gate::Gate;
use admit::tower::{AdmitLayer, HeaderKey};
use admit::{BucketConfig, Clock, Limiter};
use axum::body::Body;
use http::{HeaderName, HeaderValue, Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tower::Service;
use tower_governor::governor::{GovernorConfig, GovernorConfigBuilder};
use tower_governor::key_extractor::KeyExtractor;
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

/// admit's layer: a gate holding the keyed limiter alone (cap 16,384) on `clock`.
pub fn admit_layer<C: Clock>(clock: C) -> AdmitLayer<HeaderKey, C> {
    let limiter = Limiter::builder()
        .cap(16_384)
        .build_with_clock(
            [BucketConfig::new(BURST, Duration::from_millis(1)).unwrap()],
            clock,
        )
        .unwrap();
    AdmitLayer::builder(HeaderKey::new(HeaderName::from_static(KEY_HEADER)))
        .gate(Gate::new().rate(limiter, 0))
        .build()
        .unwrap()
}

/// tower_governor's layer, configured to the same limit.
pub fn governor_layer() -> GovernorLayer<Header, governor::middleware::NoOpMiddleware, Body> {
    let config: GovernorConfig<Header, _> = GovernorConfigBuilder::default()
        .per_millisecond(1)
        .burst_size(BURST)
        .key_extractor(Header)
        .finish()
        .unwrap();
    GovernorLayer::new(config)
}
