//! A sequencer with a flooding agent in front of it, without quotas and with them.
//!
//! One writer thread applies ops from a channel at a fixed cost (a busy-wait of 50 µs, the
//! stand-in for verifying and applying an op). Two actors submit to it:
//!
//! * a **human**, who submits one op every 2 ms, 300 ops in all, and measures each op's wait
//!   from enqueue to applied;
//! * an **agent** with a backlog of 20,000 ops in a retry loop: whenever an op is refused it
//!   backs off 20 µs and tries again.
//!
//! The scenario runs twice, with `Quotas::builder().quota(UNLIMITED)` (no quota: every op is
//! admitted, so the agent's whole backlog lands in the channel ahead of the human) and with
//! `Quotas::new()` (`DEFAULT_QUOTA`, 32 ops of any one actor awaiting a decision). With the
//! quota, a human op never finds more than Q of the agent's ops ahead of it, so its wait is
//! bounded by about `Q × apply cost` plus its own apply, whatever the agent does. Wall-clock
//! waits can still exceed that bound when the OS deschedules the writer; the count of flood
//! ops ahead cannot.
//!
//! The writer is a `'static` thread that owns its channel, as a real sequencer's is: each op
//! carries an [`OwnedPermit`] (from `Quotas::try_acquire_owned`, no borrow of the quotas) that
//! frees its actor's place when the writer has decided it and drops it.
//!
//! Run: `cargo run --release --example sequencer` (about 2 s; real time is the point).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use admit::fairness::{OwnedPermit, Quotas};
use admit::fairness::{DEFAULT_QUOTA, UNLIMITED};
use std::error::Error;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// What the writer spends on each op.
const APPLY_COST: Duration = Duration::from_micros(50);
/// The human's pace and volume.
const HUMAN_EVERY: Duration = Duration::from_millis(2);
const HUMAN_OPS: u32 = 300;
/// The agent's backlog: more than the writer can apply while the human is submitting
/// (300 × 2 ms = 600 ms = 12,000 applies), so the flood lasts the whole run.
const AGENT_BACKLOG: u32 = 20_000;
/// How long the agent waits after a refusal before trying again.
const AGENT_BACKOFF: Duration = Duration::from_micros(20);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Actor {
    Human,
    Agent,
}

/// One op in the writer's channel, with its place in its actor's quota.
struct Op {
    from: Actor,
    enqueued: Instant,
    permit: OwnedPermit,
}

/// What one run of the scenario measured.
struct Outcome {
    /// Each human op's wait from enqueue to applied, sorted.
    human_waits: Vec<Duration>,
    /// The most agent ops awaiting a decision when a human op was enqueued.
    most_flood_ahead: usize,
    agent_applied: u32,
    agent_refused: u64,
    human_refused: u64,
    /// Mean wall-clock time the writer spent per op: above `APPLY_COST` when the OS
    /// deschedules it mid-apply (a shared machine).
    apply_wall: Duration,
    elapsed: Duration,
}

/// The fixed cost of applying one op: real time, spent on the writer's core.
fn apply(cost: Duration) {
    let start = Instant::now();
    while start.elapsed() < cost {
        std::hint::spin_loop();
    }
}

fn run(quotas: &Quotas) -> Result<Outcome, Box<dyn Error>> {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<Op>();
    // Agent ops admitted and not yet decided: incremented before the send, decremented by the
    // writer after applying, so at a human's enqueue it counts the flood ops ahead of it
    // (the one being applied included).
    let flood_pending = Arc::new(AtomicUsize::new(0));
    let human_done = AtomicBool::new(false);

    // The writer owns the receiving end and outlives any borrow: a `'static` thread.
    let writer = {
        let flood_pending = Arc::clone(&flood_pending);
        thread::spawn(move || {
            let mut waits = Vec::with_capacity(HUMAN_OPS as usize);
            let mut agent_applied = 0u32;
            let mut applying = Duration::ZERO;
            // Ends when every sender is gone and the channel is drained.
            for op in rx {
                let began = Instant::now();
                apply(APPLY_COST);
                applying += began.elapsed();
                match op.from {
                    Actor::Human => waits.push(op.enqueued.elapsed()),
                    Actor::Agent => {
                        agent_applied += 1;
                        // Relaxed: a count for the report; the ops travel through the channel.
                        flood_pending.fetch_sub(1, Ordering::Relaxed);
                    }
                }
                // Decided: the permit frees its actor's place.
                op.permit.complete();
            }
            let applied = agent_applied + waits.len() as u32;
            (waits, agent_applied, applying / applied.max(1))
        })
    };

    let outcome = thread::scope(|s| -> Result<Outcome, Box<dyn Error>> {
        let agent = {
            let tx = tx.clone();
            let (flood_pending, human_done) = (&flood_pending, &human_done);
            s.spawn(move || {
                let mut refused = 0u64;
                let mut sent = 0u32;
                // Relaxed: a stop flag that orders no data; a late view sends one more op.
                while sent < AGENT_BACKLOG && !human_done.load(Ordering::Relaxed) {
                    match quotas.try_acquire_owned(b"agent") {
                        Ok(permit) => {
                            // Relaxed: counted before the send, and only read as a statistic.
                            flood_pending.fetch_add(1, Ordering::Relaxed);
                            let op = Op {
                                from: Actor::Agent,
                                enqueued: Instant::now(),
                                permit,
                            };
                            if tx.send(op).is_err() {
                                break; // the writer is gone
                            }
                            sent += 1;
                        }
                        Err(_) => {
                            refused += 1;
                            thread::sleep(AGENT_BACKOFF);
                        }
                    }
                }
                refused
            })
        };

        let human = {
            let (flood_pending, human_done) = (&flood_pending, &human_done);
            s.spawn(move || {
                let mut most_ahead = 0usize;
                let mut refused = 0u64;
                for i in 1..=HUMAN_OPS {
                    let due = start + HUMAN_EVERY * i;
                    thread::sleep(due.saturating_duration_since(Instant::now()));
                    let permit = loop {
                        match quotas.try_acquire_owned(b"human") {
                            Ok(permit) => break permit,
                            // Never expected: the human has at most one op awaiting a decision.
                            Err(_) => {
                                refused += 1;
                                thread::sleep(Duration::from_micros(100));
                            }
                        }
                    };
                    // Relaxed: a reported statistic, the flood ops ahead of this one.
                    most_ahead = most_ahead.max(flood_pending.load(Ordering::Relaxed));
                    let op = Op {
                        from: Actor::Human,
                        enqueued: Instant::now(),
                        permit,
                    };
                    if tx.send(op).is_err() {
                        break;
                    }
                }
                // Relaxed: see the agent's loop.
                human_done.store(true, Ordering::Relaxed);
                (most_ahead, refused)
            })
        };

        let (most_flood_ahead, human_refused) =
            human.join().map_err(|_| "the human thread panicked")?;
        let agent_refused = agent.join().map_err(|_| "the agent thread panicked")?;
        // Every op is submitted; wait until the writer has decided them all.
        quotas.wait_idle();
        let (mut human_waits, agent_applied, apply_wall) =
            writer.join().map_err(|_| "the writer thread panicked")?;
        human_waits.sort_unstable();
        Ok(Outcome {
            human_waits,
            most_flood_ahead,
            agent_applied,
            agent_refused,
            human_refused,
            apply_wall,
            elapsed: start.elapsed(),
        })
    })?;
    Ok(outcome)
}

/// Nearest-rank percentile of sorted `waits`.
fn percentile(waits: &[Duration], p: f64) -> Duration {
    let rank = ((waits.len() as f64 * p).ceil() as usize).saturating_sub(1);
    waits.get(rank).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() -> Result<(), Box<dyn Error>> {
    println!(
        "writer: {} µs per op; human: {HUMAN_OPS} ops, one every {} ms; \
         agent: {AGENT_BACKLOG}-op backlog, {} µs backoff on refusal\n",
        APPLY_COST.as_micros(),
        HUMAN_EVERY.as_millis(),
        AGENT_BACKOFF.as_micros(),
    );
    let scenarios = [
        (
            "no quota (UNLIMITED)".to_string(),
            Quotas::builder().quota(UNLIMITED).build()?,
        ),
        (
            format!("Quotas::new() (Q = {DEFAULT_QUOTA})"),
            Quotas::new(),
        ),
    ];
    println!(
        "{:<24} {:>10} {:>10} {:>10} {:>12} {:>10} {:>9} {:>8} {:>6}",
        "", "human wait", "", "", "flood ops", "agent ops", "agent", "apply", "run"
    );
    println!(
        "{:<24} {:>10} {:>10} {:>10} {:>12} {:>10} {:>9} {:>8} {:>6}",
        "quotas", "p50", "p99", "max", "ahead (max)", "applied", "refusals", "(wall)", ""
    );
    for (name, quotas) in &scenarios {
        let o = run(quotas)?;
        println!(
            "{:<24} {:>10} {:>10} {:>10} {:>12} {:>10} {:>9} {:>5} µs {:>4.1} s",
            name,
            ms(percentile(&o.human_waits, 0.50)),
            ms(percentile(&o.human_waits, 0.99)),
            ms(o.human_waits.last().copied().unwrap_or_default()),
            o.most_flood_ahead,
            o.agent_applied,
            o.agent_refused,
            o.apply_wall.as_micros(),
            o.elapsed.as_secs_f64(),
        );
        if o.human_refused > 0 {
            println!("  (the human was refused {} times)", o.human_refused);
        }
    }
    let q = DEFAULT_QUOTA;
    println!(
        "\nbound with Q = {q}: at most {q} flood ops ahead of a human op, \
         Q × apply cost = {q} × {} µs = {} (plus its own apply: {})",
        APPLY_COST.as_micros(),
        ms(APPLY_COST * q),
        ms(APPLY_COST * (q + 1)),
    );
    println!(
        "the bound is in queue positions; in wall time it scales with the apply's wall time \
         (column \"apply\"), which exceeds {} µs when the writer is descheduled",
        APPLY_COST.as_micros()
    );
    Ok(())
}
