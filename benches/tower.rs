//! The tower layer's per-request overhead over a no-op service, in process (no network),
//! beside `tower_governor` configured to the same limit, both keyed by one request header.
//!
//! Every contender serves the same pre-built requests; a request's future is polled once with
//! a no-op waker (every service here answers at once), so no runtime is timed. The overhead
//! of a layer is its row minus the `no layer` row of the same workload.
//!
//! Run: `cargo bench --bench tower --features tower`. Results are in docs/benchmarks.md.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use admit::gate::Gate;
use admit::tower::{AdmitLayer, HeaderKey};
use admit::{BucketConfig, Limiter, MonotonicClock};
use axum::body::Body;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use http::{HeaderName, HeaderValue, Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tower::{service_fn, Layer, Service};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor;
use tower_governor::{GovernorError, GovernorLayer};

const KEY_HEADER: &str = "x-client";
/// A burst no run exhausts, one token back per millisecond: every request is admitted.
const BURST: u32 = 1_000_000_000;

/// The request header as tower_governor's key (a cheap clone of shared bytes, as admit's
/// `HeaderKey` reads it without copying).
#[derive(Clone)]
struct Header;

impl KeyExtractor for Header {
    type Key = HeaderValue;

    fn extract<T>(&self, req: &Request<T>) -> Result<Self::Key, GovernorError> {
        req.headers()
            .get(KEY_HEADER)
            .cloned()
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

async fn ok<B>(_: Request<B>) -> Result<Response<Body>, Infallible> {
    Ok(Response::new(Body::empty()))
}

/// Polls a future that is ready at once.
fn now<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("every service here answers at once"),
    }
}

fn serve<S>(service: &mut S, request: Request<Body>) -> S::Response
where
    S: Service<Request<Body>>,
    S::Error: std::fmt::Debug,
{
    now(std::future::poll_fn(|cx| service.poll_ready(cx))).unwrap();
    now(service.call(request)).unwrap()
}

fn requests(keys: &[HeaderValue], n: usize) -> Vec<Request<Body>> {
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

fn workload(c: &mut Criterion, name: &str, keys: Vec<HeaderValue>) {
    let mut g = c.benchmark_group(format!("tower/{name}"));
    const BATCH: usize = 1_000;

    let mut bare = service_fn(ok);
    g.bench_function("no layer", |b| {
        b.iter_batched(
            || requests(&keys, BATCH),
            |batch| {
                for r in batch {
                    black_box(serve(&mut bare, r));
                }
            },
            BatchSize::LargeInput,
        )
    });

    let clock = MonotonicClock::new();
    let limiter = Limiter::builder()
        .cap(16_384)
        .build_with_clock(
            [BucketConfig::new(BURST, Duration::from_millis(1)).unwrap()],
            clock,
        )
        .unwrap();
    let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static(KEY_HEADER)))
        .gate(Gate::new().rate(limiter, 0))
        .build()
        .unwrap();
    let mut admit = layer.layer(service_fn(ok));
    // Every key charged once before timing: the rows time hits, not inserts.
    for r in requests(&keys, keys.len()) {
        assert_eq!(serve(&mut admit, r).status(), 200);
    }
    g.bench_function("admit AdmitLayer", |b| {
        b.iter_batched(
            || requests(&keys, BATCH),
            |batch| {
                for r in batch {
                    black_box(serve(&mut admit, r));
                }
            },
            BatchSize::LargeInput,
        )
    });

    let config = GovernorConfigBuilder::default()
        .per_millisecond(1)
        .burst_size(BURST)
        .key_extractor(Header)
        .finish()
        .unwrap();
    let mut governor = GovernorLayer::<Header, _, Body>::new(config).layer(service_fn(ok));
    for r in requests(&keys, keys.len()) {
        assert_eq!(serve(&mut governor, r).status(), 200);
    }
    g.bench_function("tower_governor GovernorLayer", |b| {
        b.iter_batched(
            || requests(&keys, BATCH),
            |batch| {
                for r in batch {
                    black_box(serve(&mut governor, r));
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn layers(c: &mut Criterion) {
    workload(c, "1 hot key", vec![HeaderValue::from_static("client-0")]);
    let many = (0..10_000)
        .map(|i| HeaderValue::from_str(&format!("client-{i}")).unwrap())
        .collect();
    workload(c, "10,000 keys", many);
}

criterion_group!(benches, layers);
criterion_main!(benches);
