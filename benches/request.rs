//! One request through all three defences (#15's third goal): an in-flight place taken and
//! given back, one rate token, one volume charge, for the same actor, with `now` handed.
//!
//! * **admit**: the actor hashed once per request (`HashedActor::new`), then
//!   `Quotas::try_acquire_hashed` (the permit dropped at the end of the request),
//!   `Limiter::try_acquire_hashed_at` and `RateLimit::try_acquire_hashed_at`.
//! * **admit, hashed once per connection**: the same three calls, handed a `HashedActor` made
//!   before the run, as a server that hashes an actor once per connection passes it to every
//!   request (#15 item 3 allows either). The goal reads the first row; this one says what the
//!   second deployment gets.
//! * **admit's `Gate`**: the same three defences, configured alike, behind one
//!   `Gate::try_acquire_at` (the actor hashed per request, the pass dropped at the end of the
//!   request, the rate token refunded if the volume refuses): what the instruction bench's
//!   `gate request` rows count; and the same `Gate` handed a `HashedActor` made before the
//!   run (`Gate::try_acquire_hashed_at`).
//! * **the obvious stack** a user writes first, on the same names: governor's keyed limiter
//!   (`check_key` on its default clock; it takes no reading), a `DashMap<String, AtomicU32>`
//!   in-flight count (incremented, then decremented when the request ends) and a
//!   `DashMap<String, AtomicU64>` volume count.
//! * **the floor** of admit's request: its one hash and its seven locked RMWs on bare arrays,
//!   with none of the defences' logic.
//!
//! Every limit is far above what a run reaches, so every request is admitted by every
//! contender and all do the same work. One thread, then two started together by a barrier
//! (each on its own half of the names). Before timing, each contender has seen every name,
//! and admit's allocations are asserted to stay at zero over a whole run of requests.
//!
//! On a VM the two-thread rows move with where the vCPUs land; `benches/request_paired.rs`
//! times the same contenders in interleaved turns, so that their ratios can be read.
//!
//! Run: `cargo bench --bench request`. Results are in docs/benchmarks.md.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use cap::Cap;
use criterion::{criterion_group, criterion_main, Criterion};
use request_stacks::two_keys::{AdmitGateTwoKeys, ObviousTwoKeys};
use request_stacks::{
    actors, drive, names, side_by_side, Admit, AdmitGate, AdmitGatePerConnection,
    AdmitPerConnection, Floor, Obvious, Stack,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

mod request_stacks;
mod shared;

#[global_allocator]
static ALLOC: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

fn one_thread<S: Stack>(c: &mut Criterion, s: &S, names: &[String]) {
    let names = &actors::<S>(names)[..];
    let now = s.now_ns();
    assert_eq!(drive(s, names, names.len() as u64, now), 0);
    c.bench_function(&format!("request/1 thread/{}", S::NAME), |b| {
        b.iter_custom(|iters| {
            let now = s.now_ns();
            let start = Instant::now();
            let refused = drive(s, names, iters, now);
            let elapsed = start.elapsed();
            assert_eq!(refused, 0, "a request was refused");
            elapsed
        })
    });
}

fn two_threads<S: Stack>(c: &mut Criterion, s: &S, names: &[String]) {
    let names = actors::<S>(names);
    let (left, right) = names.split_at(names.len() / 2);
    c.bench_function(&format!("request/2 threads/{}", S::NAME), |b| {
        // Per request: each thread runs `iters`, side by side; the slower one is the time.
        b.iter_custom(|iters| side_by_side(s, &[left, right], iters, s.now_ns(), |_| {}))
    });
}

/// admit allocates nothing per request once built: a whole pass over the names, and a
/// million distinct names after it, leave the allocation total where it was.
fn assert_admit_allocates_nothing(admit: &Admit, names: &[String]) {
    let now = admit.now_ns();
    let fresh: Vec<String> = (0..1_000_000).map(|i| format!("fresh-{i:012}")).collect();
    let before = ALLOC.total_allocated();
    assert_eq!(drive(admit, names, 100_000, now), 0);
    for name in &fresh {
        black_box(admit.request(name, now));
    }
    assert_eq!(
        ALLOC.total_allocated(),
        before,
        "admit allocated on a decision"
    );
    let memory =
        admit.in_flight.memory_bytes() + admit.rate.memory_bytes() + admit.volume.memory_bytes();
    eprintln!("admit's three defences: {memory} bytes, the same before and after 1M names");
}

fn benches(c: &mut Criterion) {
    // The default clock's updater runs for the whole run (see benches/limiter.rs).
    let _updater = admit::RecentClock::new();
    let names = names();
    let admit = Admit::new();
    let per_connection = AdmitPerConnection(Admit::new());
    let obvious = Obvious::new();
    let memory_before =
        admit.in_flight.memory_bytes() + admit.rate.memory_bytes() + admit.volume.memory_bytes();
    let floor = Floor::new();
    let gate = AdmitGate::new();
    let gate_per_connection = AdmitGatePerConnection(AdmitGate::new());
    one_thread(c, &admit, &names);
    one_thread(c, &per_connection, &names);
    one_thread(c, &gate, &names);
    one_thread(c, &gate_per_connection, &names);
    one_thread(c, &obvious, &names);
    one_thread(c, &floor, &names);
    two_threads(c, &admit, &names);
    two_threads(c, &per_connection, &names);
    two_threads(c, &obvious, &names);
    two_threads(c, &floor, &names);
    // The two-key composition (claim and source, two rate limits) beside the same by hand.
    let gate_two_keys = AdmitGateTwoKeys::new();
    let obvious_two_keys = ObviousTwoKeys::new();
    one_thread(c, &gate_two_keys, &names);
    one_thread(c, &obvious_two_keys, &names);
    two_threads(c, &gate_two_keys, &names);
    two_threads(c, &obvious_two_keys, &names);
    assert_admit_allocates_nothing(&admit, &names);
    let memory_after =
        admit.in_flight.memory_bytes() + admit.rate.memory_bytes() + admit.volume.memory_bytes();
    assert_eq!(memory_before, memory_after);
}

criterion_group! {
    name = request;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(request);
