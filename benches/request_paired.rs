//! The request bench's five contenders (`benches/request.rs`), and the two-key composition
//! (claim and source, two rate limits: `request_stacks::two_keys`) beside its obvious stack,
//! interleaved in short turns, so that a ratio compares runs made under the same conditions.
//!
//! Why this exists beside the criterion bench: on a two-vCPU VM, two threads pay mostly for
//! cache lines moving between the vCPUs, and what a move costs depends on where the hypervisor
//! has put them. Criterion times one contender for seconds, then the next, and the two-thread
//! floor (a hash and seven locked RMWs) has measured 68 ns in one run and 204 ns in the next,
//! so its two-thread rows cannot be compared with each other. Here each round gives every
//! contender one turn of the same number of requests per thread (tens of milliseconds), in an
//! order rotated each round, and the ratio to the obvious stack doing the same work is taken within the round. The
//! medians over the rounds are the result. Each thread is pinned to one CPU (the first thread
//! to the first CPU the process may use, the second to the second), so every contender's turns
//! run on the same CPUs. One thread is measured the same way, as a control against the
//! criterion bench.
//!
//! Every request is admitted by every contender (asserted), as in `benches/request.rs`.
//!
//! Run: `cargo bench --bench request_paired`. Results are in docs/benchmarks.md.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use request_stacks::two_keys::{AdmitGateTwoKeys, ObviousTwoKeys};
use request_stacks::{
    actors, names, side_by_side, Admit, AdmitGate, AdmitPerConnection, Floor, Obvious, Stack,
};

// Not every contender is paired (the gate handed a hashed actor is not).
#[allow(dead_code)]
mod request_stacks;
mod shared;

/// Rounds per thread count; each gives every contender one turn.
const ROUNDS: usize = 100;
/// Requests each thread makes in one turn.
const TURN: u64 = 200_000;
/// The contenders, in the order of the columns printed.
const COLUMNS: [&str; 7] = [
    Admit::NAME,
    AdmitPerConnection::NAME,
    Obvious::NAME,
    Floor::NAME,
    AdmitGate::NAME,
    AdmitGateTwoKeys::NAME,
    ObviousTwoKeys::NAME,
];
/// The column each is compared with: the obvious stack doing the same work.
const ANCHOR: [usize; 7] = [2, 2, 2, 2, 2, 6, 6];

/// One turn of `s` on `threads` pinned threads, each on its own share of the names: ns per
/// request of the slowest thread.
fn turn<S: Stack>(s: &S, actors: &[S::Actor], threads: usize) -> f64 {
    let shares: Vec<&[S::Actor]> = actors.chunks(actors.len() / threads).collect();
    let slowest = side_by_side(s, &shares, TURN, s.now_ns(), pin);
    slowest.as_nanos() as f64 / TURN as f64
}

/// Pins the calling thread to the `k`-th CPU it may run on (wrapping), so that each thread's
/// turns of every contender run on one CPU. Where pinning is refused, the thread runs where the
/// scheduler puts it.
fn pin(k: usize) {
    use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
    let Ok(allowed) = sched_getaffinity(None) else {
        return;
    };
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|&cpu| allowed.is_set(cpu))
        .collect();
    let Some(&cpu) = cpus.get(k % cpus.len().max(1)) else {
        return;
    };
    let mut one = CpuSet::new();
    one.set(cpu);
    let _ = sched_setaffinity(None, &one);
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    // The default clock's updater runs for the whole run, as in `benches/request.rs`.
    let _updater = admit::RecentClock::new();
    let names = names();
    let admit = Admit::new();
    let per_connection = AdmitPerConnection(Admit::new());
    let obvious = Obvious::new();
    let floor = Floor::new();
    let gate = AdmitGate::new();
    let gate_two_keys = AdmitGateTwoKeys::new();
    let obvious_two_keys = ObviousTwoKeys::new();
    let two_keys = actors::<ObviousTwoKeys>(&names);
    let (admit_actors, connection_actors, obvious_actors, floor_actors) = (
        actors::<Admit>(&names),
        actors::<AdmitPerConnection>(&names),
        actors::<Obvious>(&names),
        actors::<Floor>(&names),
    );
    for threads in [1, 2] {
        println!("request_paired/{threads} thread(s): ns per request, each round's turns in the order rotated");
        // ns per request, by column then round.
        let mut times = vec![Vec::with_capacity(ROUNDS); COLUMNS.len()];
        for round in 0..ROUNDS {
            let mut row = [0.0; COLUMNS.len()];
            for k in 0..COLUMNS.len() {
                let column = (k + round) % COLUMNS.len();
                row[column] = match column {
                    0 => turn(&admit, &admit_actors, threads),
                    1 => turn(&per_connection, &connection_actors, threads),
                    2 => turn(&obvious, &obvious_actors, threads),
                    3 => turn(&floor, &floor_actors, threads),
                    4 => turn(&gate, &obvious_actors, threads),
                    5 => turn(&gate_two_keys, &two_keys, threads),
                    _ => turn(&obvious_two_keys, &two_keys, threads),
                };
            }
            let cells: Vec<String> = row.iter().map(|t| format!("{t:7.1}")).collect();
            let ratios: Vec<String> = (0..COLUMNS.len())
                .filter(|&c| ANCHOR[c] != c)
                .map(|c| format!("{:.3}", row[c] / row[ANCHOR[c]]))
                .collect();
            println!(
                "  round {round:2}: {}   to its obvious stack: {}",
                cells.join(" "),
                ratios.join(" ")
            );
            for (column, time) in row.into_iter().enumerate() {
                times[column].push(time);
            }
        }
        for (column, name) in COLUMNS.iter().enumerate() {
            let ratios: Vec<f64> = times[column]
                .iter()
                .zip(&times[ANCHOR[column]])
                .map(|(time, obvious)| time / obvious)
                .collect();
            let (low, high) = ratios
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
            println!(
                "request_paired/{threads} thread(s)/{name}: median {:.1} ns; to obvious: median {:.3}, rounds {low:.3} to {high:.3}",
                median(times[column].clone()),
                median(ratios),
            );
        }
    }
}
