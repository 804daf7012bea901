//! `Quotas` (per-actor in-flight quotas) beside the obvious ways to write the same thing, in
//! the same run, behind one trait so every contender runs the identical workload:
//!
//! * `admit`: `Quotas::try_acquire`, released by dropping the (borrowing) permit;
//! * `admit-adaptive`: `AdaptiveQuotas::try_acquire` (the normal class) under an adaptive
//!   total: every op also counted in the one total word, the default `RecentClock` read at
//!   admission and at release;
//! * `admit-owned`: `Quotas::try_acquire_owned`, whose permit holds its own `Arc` handle;
//! * `mutex-hashmap`: `Mutex<HashMap<String, u32>>`: lock, get-or-insert the name, check
//!   `< Q`, increment; release: lock, decrement, remove at 0;
//! * `dashmap`: `DashMap<String, AtomicU32>`: the count bumped by CAS under the shard's read
//!   guard, the name inserted through `entry` on a miss; release: decrement, `remove_if` zero.
//!
//! Every contender enforces the same quota, [`DEFAULT_QUOTA`] (32). The map baselines remove an
//! actor once its count returns to zero; admit keeps the entry until its table needs the place. In every timed workload each thread holds at most one or two
//! permits at a time, so no acquire is ever refused: the numbers are the admitting path.
//!
//! After the timed workloads, a churn of 1,000,000 distinct actor names is run once per
//! contender under a counting global allocator (`cap`), to report what each keeps in memory.
//!
//! Run: `cargo bench --bench fairness`. Results are recorded in docs/benchmarks.md. To profile
//! one workload: `FAIRNESS_SKIP_MEMORY=1 cargo bench --bench fairness -- --profile-time 5
//! fairness/uncontended/admit` under `perf record`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use cap::Cap;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use in_flight::{Admit, AdmitAdaptive, AdmitOwned, Contender, Dash, MutexMap};
use std::alloc::System;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

mod in_flight;

// ---- workloads ------------------------------------------------------------------------------

/// One op of `actor`: admitted (never refused in these workloads), then released.
#[inline]
fn op<C: Contender>(c: &C, actor: &str) {
    let held = c.acquire(black_box(actor)).expect("never refused here");
    c.release(actor, black_box(held));
}

/// Runs `f` once per contender in one benchmark group, so they sit side by side.
fn each_contender(
    c: &mut Criterion,
    group: &str,
    mut f: impl FnMut(&mut BenchmarkGroup<'_, criterion::measurement::WallTime>, Which),
) {
    let mut g = c.benchmark_group(group);
    for which in [
        Which::Admit,
        Which::AdmitAdaptive,
        Which::AdmitOwned,
        Which::MutexMap,
        Which::Dash,
    ] {
        f(&mut g, which);
    }
    g.finish();
}

#[derive(Clone, Copy)]
enum Which {
    Admit,
    AdmitAdaptive,
    AdmitOwned,
    MutexMap,
    Dash,
}

/// Calls a generic function with the contender type `which` names.
macro_rules! with_contender {
    ($which:expr, $f:ident ( $($arg:expr),* )) => {
        match $which {
            Which::Admit => $f::<Admit>($($arg),*),
            Which::AdmitAdaptive => $f::<AdmitAdaptive>($($arg),*),
            Which::AdmitOwned => $f::<AdmitOwned>($($arg),*),
            Which::MutexMap => $f::<MutexMap>($($arg),*),
            Which::Dash => $f::<Dash>($($arg),*),
        }
    };
}

/// One thread, one actor: every op inserts the actor and removes it again.
fn uncontended<C: Contender>(g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    let c = C::new();
    g.bench_function(C::NAME, |b| b.iter(|| op(&c, "human")));
}

/// One thread, one actor that already has an op in flight: every op is a count going 1 → 2 → 1,
/// no insert, no removal.
fn uncontended_in_flight<C: Contender>(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
) {
    let c = C::new();
    let pinned = c.acquire("human").expect("first op");
    g.bench_function(C::NAME, |b| b.iter(|| op(&c, "human")));
    c.release("human", pinned);
}

/// Two threads started together by a barrier, each running `iters` ops of its own actor;
/// the time is the measuring thread's, with the other one running throughout.
fn two_threads<C: Contender>(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    actors: [&'static str; 2],
) {
    let c = C::new();
    g.bench_function(C::NAME, |b| {
        b.iter_custom(|iters| {
            let barrier = Barrier::new(2);
            std::thread::scope(|s| {
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..iters {
                        op(&c, actors[1]);
                    }
                });
                barrier.wait();
                let start = Instant::now();
                for _ in 0..iters {
                    op(&c, actors[0]);
                }
                start.elapsed()
            })
        })
    });
}

/// One thread, a new name every op, cycling through `names` (1,000,000 distinct): every op
/// inserts a never-seen-recently actor and removes it.
fn churn<C: Contender>(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    names: &[String],
) {
    let c = C::new();
    let mut next = 0usize;
    g.bench_function(C::NAME, |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let name = names.get(next).expect("in range");
                next = (next + 1) % names.len();
                op(&c, name);
            }
            start.elapsed()
        })
    });
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("actor-{i:07}")).collect()
}

const CHURN_NAMES: usize = 1_000_000;

fn timed(c: &mut Criterion) {
    each_contender(c, "fairness/uncontended", |g, w| {
        with_contender!(w, uncontended(g))
    });
    each_contender(c, "fairness/uncontended-in-flight", |g, w| {
        with_contender!(w, uncontended_in_flight(g))
    });
    each_contender(c, "fairness/2-threads-distinct-actors", |g, w| {
        with_contender!(w, two_threads(g, ["actor-a", "actor-b"]))
    });
    each_contender(c, "fairness/2-threads-one-actor", |g, w| {
        with_contender!(w, two_threads(g, ["agent", "agent"]))
    });
    let names = names(CHURN_NAMES);
    each_contender(c, "fairness/churn-1M-names", |g, w| {
        with_contender!(w, churn(g, &names))
    });
}

// ---- memory ---------------------------------------------------------------------------------

/// Counts live bytes (the `cap` crate: the crate forbids `unsafe_code`, so the bench cannot
/// implement `GlobalAlloc` itself). One relaxed atomic add per allocation, timed runs included.
#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

fn live() -> isize {
    isize::try_from(ALLOC.allocated()).unwrap_or(isize::MAX)
}

/// Net live bytes allocated while `f` runs, and the live bytes `f` reports at its fullest
/// moment (relative to the start).
fn counted<R>(f: impl FnOnce(&dyn Fn() -> isize) -> R) -> (R, isize) {
    let start = live();
    let r = f(&|| live() - start);
    (r, live() - start)
}

/// A churn of every name in `names`, acquire then release each, then the same names all in
/// flight at once and released; prints what the contender's memory did.
fn memory_of<C: Contender>(names: &[String]) {
    let c = C::new();
    let fixed_before = c.fixed_bytes();

    let (churn_peak, churn_net) = counted(|now| {
        let mut peak = 0;
        for name in names {
            op(&c, name);
            peak = peak.max(now());
        }
        peak
    });

    // Every name in flight at once (admit refuses beyond its table and shared quota), then
    // all released. The holding vector is allocated before counting starts.
    let mut held: Vec<Option<C::Held<'_>>> = Vec::with_capacity(names.len());
    let ((admitted, burst_peak), burst_net) = counted(|now| {
        for name in names {
            held.push(c.acquire(name));
        }
        let admitted = held.iter().filter(|h| h.is_some()).count();
        let peak = now();
        for (name, h) in names.iter().zip(held.drain(..)) {
            if let Some(h) = h {
                c.release(name, h);
            }
        }
        (admitted, peak)
    });

    println!(
        "memory {:<14} churn of {}: net {:>10} B, peak {:>10} B | all in flight: admitted {:>7}, \
         peak {:>10} B, net after release {:>10} B{}",
        C::NAME,
        names.len(),
        churn_net,
        churn_peak,
        admitted,
        burst_peak,
        burst_net,
        fixed_before.map_or(String::new(), |b| format!(" | memory_bytes() {b} B")),
    );
    if let Some(before) = fixed_before {
        assert_eq!(c.fixed_bytes(), Some(before), "admit's table changed size");
        assert_eq!(
            (churn_net, churn_peak, burst_net, burst_peak),
            (0, 0, 0, 0),
            "admit allocated on a decision path"
        );
    }
}

fn memory(_: &mut Criterion) {
    // Criterion's name filter does not reach this target; profiling one workload
    // (`--profile-time`) sets this to keep the memory runs out of the profile.
    if std::env::var_os("FAIRNESS_SKIP_MEMORY").is_some() {
        return;
    }
    let names = names(CHURN_NAMES);
    memory_of::<Admit>(&names);
    memory_of::<AdmitOwned>(&names);
    memory_of::<MutexMap>(&names);
    memory_of::<Dash>(&names);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = timed, memory
}
criterion_main!(benches);
