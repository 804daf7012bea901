//! Scenario 3 (seed 002): how much each kind of actor turns into permanent storage, with no
//! defence and with volume quotas of one, two and four hash rows.

use crate::progress::Phase;
use crate::report::{Cell, Table};
use admit::quota::{Quota, RateLimit, BUCKETS};
use std::collections::HashSet;
use std::sync::{mpsc, Barrier};

pub const HEADING: &str =
    "quota: abusive sessions, honest actors, a name-rotating attacker (seed 002)";

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    /// Legitimate but abusive sessions, each flooding valid writes.
    pub abusive: u32,
    /// Writes each abusive session attempts.
    pub abusive_writes: u32,
    /// Honest actors, each writing a little.
    pub honest: u32,
    /// Writes each honest actor makes.
    pub honest_writes: u32,
    /// Names the rotating attacker uses, one write each.
    pub rotating: u32,
    /// Bytes per abusive or rotating write.
    pub big_write: u64,
    /// Bytes per honest write.
    pub small_write: u64,
    /// The operator's quota (`[admit.volume]` of `--config`), run beside the others when given.
    pub quota: Option<Quota>,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            abusive: 1_000,
            abusive_writes: 3_000,
            honest: 10_000,
            honest_writes: 30,
            rotating: 100_000,
            big_write: 4_096,
            small_write: 1_024,
            quota: None,
        }
    }
}

/// One run's totals.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub label: String,
    pub abusive_bytes: u64,
    pub abusive_max_session_bytes: u64,
    pub honest_bytes: u64,
    pub honest_refused_actors: u64,
    pub honest_refused_writes: u64,
    pub rotating_bytes: u64,
    pub memory_bytes: Option<usize>,
}

#[derive(Clone, Copy)]
enum Class {
    Abusive,
    Honest,
    Rotating,
}

struct Write {
    class: Class,
    actor: u64,
    bytes: u64,
}

pub fn run(params: &Params) -> Result<Vec<Run>, String> {
    let with_rows = |rows| Quota::default().with_rows(rows).map_err(|e| e.to_string());
    let mut variants: Vec<(String, Option<Quota>)> = vec![
        ("no defence".into(), None),
        (
            "admit defaults (4 rows)".into(),
            Some(with_rows(Quota::DEFAULT_ROWS)?),
        ),
        ("1 row".into(), Some(with_rows(1)?)),
        ("2 rows".into(), Some(with_rows(2)?)),
    ];
    if let Some(quota) = params.quota {
        variants.push((
            format!(
                "your quota ({}/{} B per {:?})",
                quota.events(),
                quota.bytes(),
                quota.window()
            ),
            Some(quota),
        ));
    }
    variants
        .into_iter()
        .map(|(label, quota)| {
            let phase = Phase::start(&format!("quota: {label}"));
            let run = run_once(params, &label, quota);
            phase.finish();
            run
        })
        .collect()
}

fn run_once(params: &Params, label: &str, quota: Option<Quota>) -> Result<Run, String> {
    let limiter = quota.map(RateLimit::new);
    let mut run = Run {
        label: label.to_string(),
        memory_bytes: limiter.as_ref().map(RateLimit::memory_bytes),
        ..Run::default()
    };
    let (tx, rx) = mpsc::sync_channel::<Write>(4_096);
    // The abusive sessions get a head start past the default limit, so that honest actors and
    // the rotating attacker write while the abusive sessions' buckets are full.
    let head_start = params.abusive_writes.min(Quota::default().events() + 50);
    let started = Barrier::new(3);
    std::thread::scope(|s| {
        let (tx_abusive, tx_honest, tx_rotating) = (tx.clone(), tx.clone(), tx.clone());
        let started = &started;
        s.spawn(move || {
            for round in 0..params.abusive_writes {
                if round == head_start {
                    started.wait();
                }
                for session in 0..params.abusive {
                    let w = Write {
                        class: Class::Abusive,
                        actor: u64::from(session),
                        bytes: params.big_write,
                    };
                    if tx_abusive.send(w).is_err() {
                        return;
                    }
                }
            }
            if head_start == params.abusive_writes {
                started.wait();
            }
        });
        s.spawn(move || {
            started.wait();
            for _ in 0..params.honest_writes {
                for actor in 0..params.honest {
                    let w = Write {
                        class: Class::Honest,
                        actor: 1_000_000 + u64::from(actor),
                        bytes: params.small_write,
                    };
                    if tx_honest.send(w).is_err() {
                        return;
                    }
                }
            }
        });
        s.spawn(move || {
            started.wait();
            for name in 0..params.rotating {
                let w = Write {
                    class: Class::Rotating,
                    actor: 100_000_000 + u64::from(name),
                    bytes: params.big_write,
                };
                if tx_rotating.send(w).is_err() {
                    return;
                }
            }
        });
        drop(tx);
        // The writer: one thread deciding every write, as the seed's single writer does.
        let mut per_session = vec![0u64; params.abusive as usize];
        let mut refused_honest: HashSet<u64> = HashSet::new();
        for w in rx {
            let name = actor_name(w.class, w.actor);
            let stored = match &limiter {
                Some(l) => l.try_acquire(name.as_str(), w.bytes).is_ok(),
                None => true,
            };
            match (w.class, stored) {
                (Class::Abusive, true) => {
                    run.abusive_bytes += w.bytes;
                    if let Some(b) = per_session.get_mut(w.actor as usize) {
                        *b += w.bytes;
                    }
                }
                (Class::Honest, true) => run.honest_bytes += w.bytes,
                (Class::Honest, false) => {
                    run.honest_refused_writes += 1;
                    refused_honest.insert(w.actor);
                }
                (Class::Rotating, true) => run.rotating_bytes += w.bytes,
                (Class::Abusive | Class::Rotating, false) => {}
            }
        }
        run.abusive_max_session_bytes = per_session.into_iter().max().unwrap_or(0);
        run.honest_refused_actors = refused_honest.len() as u64;
    });
    Ok(run)
}

fn actor_name(class: Class, actor: u64) -> String {
    match class {
        Class::Abusive => format!("session-{actor}"),
        Class::Honest => format!("user-{actor}"),
        Class::Rotating => format!("fresh-name-{actor}"),
    }
}

pub fn table(params: &Params, runs: &[Run]) -> Table {
    let mut t = Table::new(
        "quota",
        HEADING,
        runs.iter().map(|r| r.label.clone()).collect(),
    );
    let each = |f: &dyn Fn(&Run) -> Cell| runs.iter().map(f).collect::<Vec<_>>();
    t.row(
        "abusive sessions: bytes stored",
        "abusive_bytes",
        each(&|r| Cell::Bytes(r.abusive_bytes)),
    );
    t.row(
        "  largest single session",
        "abusive_max_session_bytes",
        each(&|r| Cell::Bytes(r.abusive_max_session_bytes)),
    );
    t.row(
        "honest actors: bytes stored",
        "honest_bytes",
        each(&|r| Cell::Bytes(r.honest_bytes)),
    );
    t.row(
        "  honest actors refused (innocent)",
        "honest_actors_refused",
        each(&|r| Cell::Count(r.honest_refused_actors)),
    );
    t.row(
        "  honest writes refused",
        "honest_writes_refused",
        each(&|r| Cell::Count(r.honest_refused_writes)),
    );
    t.row(
        "rotating names: bytes stored",
        "rotating_bytes",
        each(&|r| Cell::Bytes(r.rotating_bytes)),
    );
    t.row(
        "limiter memory (any number of names)",
        "limiter_memory_bytes",
        each(&|r| {
            r.memory_bytes
                .map_or_else(|| Cell::Text("-".into()), |b| Cell::Bytes(b as u64))
        }),
    );
    let q = Quota::default();
    t.note(format!(
        "{} abusive sessions x {} writes of {} B; {} honest actors x {} writes of {} B; {} \
         rotating names x 1 write of {} B",
        params.abusive,
        params.abusive_writes,
        params.big_write,
        params.honest,
        params.honest_writes,
        params.small_write,
        params.rotating,
        params.big_write
    ));
    t.note(format!(
        "default quota: {} events and {} B per {:?} per actor; a rotating attacker is bounded \
         only by BUCKETS x limit = {} x {} B per window",
        q.events(),
        q.bytes(),
        q.window(),
        BUCKETS,
        q.bytes()
    ));
    t
}
