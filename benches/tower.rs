//! The tower layer's per-request overhead over a no-op service, in process (no network),
//! beside `tower_governor` configured to the same limit, both keyed by one request header.
//!
//! Every contender serves the same pre-built requests; a request's future is polled once with
//! a no-op waker (every service here answers at once), so no runtime is timed. The overhead
//! of a layer is its row minus the `no layer` row of the same workload.
//!
//! Run: `cargo bench --bench tower --features tower`. Results are in docs/benchmarks.md.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use admit::MonotonicClock;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use http::HeaderValue;
use std::hint::black_box;
use tower::{service_fn, Layer};
use tower_services::{admit_layer, governor_layer, ok, requests, serve};

// The forwarded-client services are the instruction bench's rows alone.
#[allow(dead_code)]
mod tower_services;

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

    let layer = admit_layer(MonotonicClock::new());
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

    let mut governor = governor_layer().layer(service_fn(ok));
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
