//! Scenario 1 (seed 000): one writer thread applying ops at a fixed cost, a human submitting
//! now and then, an agent flooding in a retry loop; with no defence and with quotas. Then the
//! agent claiming a new key id for every op from its one address: the quota keyed by the
//! claim, which that evades, and keyed by the source, which it cannot.

use crate::progress::Phase;
use crate::report::{percentile, Cell, Table};
use admit::fairness::{Quotas, DEFAULT_QUOTA};
use admit::gate::{Admission, Gate, KeyKind, Pass};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const HEADING: &str = "fairness: one writer, a human and a flooding agent (seed 000)";

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    /// The operator's own quota, compared beside the default when given.
    pub quota: Option<u32>,
    /// The writer's cost per op.
    pub apply: Duration,
    /// How many ops the human submits.
    pub human_ops: usize,
    /// Pause between the human's ops.
    pub human_interval: Duration,
    /// Without a defence, the agent keeps this many ops queued (its own client-side window).
    pub agent_backlog: usize,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            quota: None,
            apply: Duration::from_micros(50),
            human_ops: 200,
            human_interval: Duration::from_millis(2),
            agent_backlog: 10_000,
        }
    }
}

/// Who the agent says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// One key id for every op.
    OneClaim,
    /// A new key id for every op, from its one address.
    RotatingClaims,
}

/// One column: the quota (none: no defence), the key it counts by, and the agent.
#[derive(Debug, Clone)]
struct Variant {
    label: String,
    quota: Option<u32>,
    key: KeyKind,
    agent: Agent,
}

/// One run's measurements.
#[derive(Debug, Clone)]
pub struct Run {
    pub label: String,
    pub quota: Option<u32>,
    pub key: KeyKind,
    pub agent: Agent,
    /// The human's waits, enqueue to applied, sorted.
    pub waits: Vec<Duration>,
    /// Most agent ops queued ahead of a human op when it was enqueued.
    pub max_ahead: usize,
    pub agent_admitted: u64,
    pub agent_rejected: u64,
    /// The human's tries refused before its op was admitted (its wait counts from its first).
    pub human_refused: u64,
}

impl Run {
    /// Whether the quota bounds the agent's ops ahead of a human op: there is one, and the
    /// agent cannot spread across its key.
    pub fn bounded(&self) -> bool {
        self.quota.is_some() && (self.agent == Agent::OneClaim || self.key == KeyKind::Source)
    }
}

struct Op<'g> {
    from_agent: bool,
    enqueued: Instant,
    _pass: Pass<'g>,
}

/// The agent's one address, and the human's.
const AGENT_SOURCE: &[u8] = b"agent-host";
const HUMAN_SOURCE: &[u8] = b"human-host";

/// Runs every variant: no defence, admit defaults, the operator's quota when given, and the
/// agent rotating key ids against the default quota keyed by the claim and by the source.
pub fn run(params: &Params) -> Vec<Run> {
    let one = |label: String, quota: Option<u32>| Variant {
        label,
        quota,
        key: KeyKind::Claim,
        agent: Agent::OneClaim,
    };
    let mut variants = vec![
        one("no defence".into(), None),
        one(
            format!("admit defaults (Q={DEFAULT_QUOTA})"),
            Some(DEFAULT_QUOTA),
        ),
    ];
    if let Some(q) = params.quota.filter(|&q| q != DEFAULT_QUOTA) {
        variants.push(one(format!("your quota (Q={q})"), Some(q)));
    }
    for (label, key) in [
        (ROTATING_BY_CLAIM, KeyKind::Claim),
        (ROTATING_BY_SOURCE, KeyKind::Source),
    ] {
        variants.push(Variant {
            label: label.into(),
            quota: Some(DEFAULT_QUOTA),
            key,
            agent: Agent::RotatingClaims,
        });
    }
    variants
        .into_iter()
        .map(|variant| {
            let phase = Phase::start(&format!("fairness: {}", variant.label));
            let run = run_once(params, variant);
            phase.finish();
            run
        })
        .collect()
}

/// The columns of the agent rotating key ids.
pub const ROTATING_BY_CLAIM: &str = "new key id per op, Q by claim";
pub const ROTATING_BY_SOURCE: &str = "new key id per op, Q by source";

fn run_once(params: &Params, variant: Variant) -> Run {
    let Variant {
        label,
        quota,
        key,
        agent: agent_kind,
    } = variant;
    let gate: Gate = match quota.map(|q| Quotas::builder().quota(q).build()) {
        None => Gate::new(),
        Some(Ok(quotas)) => Gate::new().in_flight_keyed(quotas, key),
        // The CLI validated the quota (>= 1), so this cannot happen; fall back to the default.
        Some(Err(_)) => Gate::new().in_flight_keyed(Quotas::new(), key),
    };
    let (tx, rx) = mpsc::channel::<Op>();
    let (waits_tx, waits_rx) = mpsc::channel::<Duration>();
    let agent_queued = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let mut max_ahead = 0;
    let mut agent_admitted = 0u64;
    let mut agent_rejected = 0u64;
    let mut human_refused = 0u64;
    std::thread::scope(|s| {
        // The writer: one op at a time, `apply` each, until told to stop.
        let (stop_ref, agent_queued_ref) = (&stop, &agent_queued);
        let writer = s.spawn(move || {
            let (stop, agent_queued) = (stop_ref, agent_queued_ref);
            while let Ok(op) = rx.recv() {
                // Relaxed: the flag orders no data; a late view only applies one more op.
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                busy_wait(params.apply);
                if op.from_agent {
                    // Relaxed: a count read only to pace the agent and report the backlog;
                    // the ops themselves travel through the channel, which orders them.
                    agent_queued.fetch_sub(1, Ordering::Relaxed);
                } else {
                    let _ = waits_tx.send(op.enqueued.elapsed());
                }
            }
        });
        // The agent: floods in a retry loop.
        let agent = {
            let tx = tx.clone();
            let (gate, agent_queued, stop) = (&gate, &agent_queued, &stop);
            s.spawn(move || {
                let (mut admitted, mut rejected) = (0u64, 0u64);
                let mut key_id = 0u64;
                // Relaxed (both): the flag and the count order no data (see the writer); a
                // stale value only lets the agent try once more or wait one turn longer.
                while !stop.load(Ordering::Relaxed) {
                    if agent_queued.load(Ordering::Relaxed) >= params.agent_backlog {
                        std::thread::yield_now();
                        continue;
                    }
                    let admission = match agent_kind {
                        Agent::OneClaim => Admission::new(b"agent", AGENT_SOURCE),
                        Agent::RotatingClaims => {
                            key_id += 1;
                            Admission::new(&key_id, AGENT_SOURCE)
                        }
                    };
                    match gate.try_admit(&admission) {
                        Ok(pass) => {
                            admitted += 1;
                            // Relaxed: a pacing count, as in the writer.
                            agent_queued.fetch_add(1, Ordering::Relaxed);
                            let op = Op {
                                from_agent: true,
                                enqueued: Instant::now(),
                                _pass: pass,
                            };
                            if tx.send(op).is_err() {
                                break;
                            }
                        }
                        Err(_) => {
                            rejected += 1;
                            std::thread::yield_now();
                        }
                    }
                }
                (admitted, rejected)
            })
        };
        // Let the agent build its backlog (as much of it as its quota allows, up to 64 ops)
        // before the human arrives; give up after five seconds on a starved machine.
        let head_start = params
            .agent_backlog
            .min(quota.map_or(usize::MAX, |q| q as usize))
            .min(64);
        let warm_up = Instant::now();
        // Relaxed: only a head start is waited for; no data is read through the count.
        while agent_queued.load(Ordering::Relaxed) < head_start
            && warm_up.elapsed() < Duration::from_secs(5)
        {
            std::thread::yield_now();
        }
        // The human: an op now and then, tried until admitted; its wait counts from the
        // first try.
        let human = Admission::new(b"human", HUMAN_SOURCE);
        for _ in 0..params.human_ops {
            std::thread::sleep(params.human_interval);
            let submitted = Instant::now();
            loop {
                if let Ok(pass) = gate.try_admit(&human) {
                    // Relaxed: a reported statistic (ops of the agent queued ahead).
                    max_ahead = max_ahead.max(agent_queued.load(Ordering::Relaxed));
                    let op = Op {
                        from_agent: false,
                        enqueued: submitted,
                        _pass: pass,
                    };
                    let _ = tx.send(op);
                    break;
                }
                human_refused += 1;
                std::thread::yield_now();
            }
        }
        // Wait until every human op has been applied, then stop everyone.
        let mut waits = Vec::with_capacity(params.human_ops);
        while waits.len() < params.human_ops {
            match waits_rx.recv() {
                Ok(w) => waits.push(w),
                Err(_) => break,
            }
        }
        // Relaxed: the joins below are what order the threads' results after this point.
        stop.store(true, Ordering::Relaxed);
        drop(tx);
        if let Ok((admitted, rejected)) = agent.join() {
            agent_admitted = admitted;
            agent_rejected = rejected;
        }
        let _ = writer.join();
        waits.sort_unstable();
        Run {
            label,
            quota,
            key,
            agent: agent_kind,
            waits,
            max_ahead,
            agent_admitted,
            agent_rejected,
            human_refused,
        }
    })
}

fn busy_wait(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// The summary table.
pub fn table(params: &Params, runs: &[Run]) -> Table {
    let mut t = Table::new(
        "fairness",
        HEADING,
        runs.iter().map(|r| r.label.clone()).collect(),
    );
    let each = |f: &dyn Fn(&Run) -> Cell| runs.iter().map(f).collect::<Vec<_>>();
    t.row(
        "human wait p50",
        "human_wait_p50_us",
        each(&|r| Cell::Time(percentile(&r.waits, 50.0))),
    );
    t.row(
        "human wait p99",
        "human_wait_p99_us",
        each(&|r| Cell::Time(percentile(&r.waits, 99.0))),
    );
    t.row(
        "human wait max",
        "human_wait_max_us",
        each(&|r| Cell::Time(percentile(&r.waits, 100.0))),
    );
    t.row(
        "agent ops ahead of a human op (max)",
        "agent_ops_ahead_max",
        each(&|r| Cell::Count(r.max_ahead as u64)),
    );
    t.row(
        "bound: Q x apply cost",
        "bound_us",
        each(&|r| match r.quota {
            Some(q) if r.bounded() => Cell::Time(params.apply.saturating_mul(q)),
            _ => Cell::Text("none".into()),
        }),
    );
    t.row(
        "human tries refused",
        "human_tries_refused",
        each(&|r| Cell::Count(r.human_refused)),
    );
    t.row(
        "agent ops admitted",
        "agent_admitted",
        each(&|r| Cell::Count(r.agent_admitted)),
    );
    t.row(
        "agent ops rejected at once",
        "agent_rejected",
        each(&|r| Cell::Count(r.agent_rejected)),
    );
    t.note(format!(
        "writer applies one op per {:?}; the human submits {} ops, one per {:?}; without a \
         defence the agent keeps {} ops queued",
        params.apply, params.human_ops, params.human_interval, params.agent_backlog
    ));
    t.note(format!(
        "the last two columns: the agent claims a new key id for every op, all from its one \
         address (the human from another); Q={DEFAULT_QUOTA} keyed by the claim counts each \
         key id apart, keyed by the source it counts the address (a rate bounds arrivals, not \
         holdings); a human's wait counts from its first try"
    ));
    t
}
