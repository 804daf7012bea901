//! Scenario 2 (seed 001): a registrar verb layer with its two arms and an in-memory record
//! store, flooded with malformed invocations from one identity and then from churning
//! identities, while the control plane brings up a wave of legitimate mints.

use crate::progress::Phase;
use crate::report::{Cell, Table};
use admit::registrar::{Bucket, CountingSink, RegistrarConfig, RegistrarLimiter, Verb};
use std::sync::atomic::{AtomicU64, Ordering};

pub const HEADING: &str = "registrar: malformed floods beside a bring-up wave (seed 001)";

/// The two registrar verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrarVerb {
    Mint,
    Retire,
}

impl Verb for RegistrarVerb {
    const ALL: &'static [Self] = &[Self::Mint, Self::Retire];

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            Self::Mint => "mint",
            Self::Retire => "retire",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    pub wave_hosts: u32,
    pub modules_per_host: u32,
    /// Malformed invocations from one identity.
    pub flood: u64,
    /// Distinct identities, one malformed invocation each.
    pub churn: u64,
    /// The operator's own numbers, run beside the defaults when given.
    pub config: Option<RegistrarConfig>,
}

/// One run's counts.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub label: String,
    pub intents: u64,
    pub outcomes: u64,
    pub malformed: u64,
    pub mints_admitted: u64,
    pub mints_throttled: u64,
    pub retry_min_secs: Option<u64>,
    pub retry_max_secs: Option<u64>,
    pub limited_predecision: u64,
    pub limited_admission: u64,
    pub live_entries: Option<(usize, usize)>,
    pub memory_bytes: Option<usize>,
}

/// The verb layer's durable records, counted.
#[derive(Default)]
struct Records {
    intents: AtomicU64,
    outcomes: AtomicU64,
}

impl Records {
    fn write_intent(&self) {
        // Relaxed: a count read only after the scope has joined every writer.
        self.intents.fetch_add(1, Ordering::Relaxed);
    }

    fn write_outcome(&self) {
        // Relaxed: as in `write_intent`.
        self.outcomes.fetch_add(1, Ordering::Relaxed);
    }
}

/// The verb layer: each arm consults its check point (if there is a limiter) before its intent.
struct VerbLayer {
    limiter: Option<RegistrarLimiter<RegistrarVerb, CountingSink>>,
    records: Records,
}

enum MintAnswer {
    Minted,
    Busy { retry_after_secs: u64 },
}

impl VerbLayer {
    /// The pre-derivation arm: a malformed request, refused by construction.
    fn malformed(&self, identity: &[u8]) {
        let write = self.limiter.as_ref().is_none_or(|l| {
            l.enter_predecision(identity, RegistrarVerb::Mint)
                .should_write()
        });
        if write {
            self.records.write_intent();
        }
        // The arm's checks run either way and its real refusal goes back to the caller.
        if write {
            self.records.write_outcome();
        }
    }

    /// The post-derivation arm: a well-formed mint.
    fn mint(&self, identity: &[u8]) -> MintAnswer {
        if let Some(l) = &self.limiter {
            if let Err(throttled) = l.enter_admission(identity, RegistrarVerb::Mint) {
                return MintAnswer::Busy {
                    retry_after_secs: throttled.retry_after().secs(),
                };
            }
        }
        self.records.write_intent();
        // The backend work would be here.
        self.records.write_outcome();
        MintAnswer::Minted
    }
}

/// Runs every variant: no defence, admit defaults, and the operator's numbers when given.
pub fn run(params: &Params) -> Result<Vec<Run>, String> {
    let mut variants: Vec<(String, Option<RegistrarConfig>)> = vec![
        ("no defence".into(), None),
        ("admit defaults".into(), Some(RegistrarConfig::default())),
    ];
    if let Some(config) = params.config.filter(|c| *c != RegistrarConfig::default()) {
        variants.push(("your numbers".into(), Some(config)));
    }
    variants
        .into_iter()
        .map(|(label, config)| {
            let phase = Phase::start(&format!("registrar: {label}"));
            let run = run_once(params, label, config);
            phase.finish();
            run
        })
        .collect()
}

fn run_once(
    params: &Params,
    label: String,
    config: Option<RegistrarConfig>,
) -> Result<Run, String> {
    let limiter = match config {
        Some(config) => Some(
            RegistrarLimiter::<RegistrarVerb>::builder(config)
                .build(CountingSink::new())
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    let layer = VerbLayer {
        limiter,
        records: Records::default(),
    };
    let wave = u64::from(params.wave_hosts) * u64::from(params.modules_per_host);
    let mut run = Run {
        label,
        malformed: params.flood + params.churn,
        ..Run::default()
    };
    std::thread::scope(|s| {
        // The attacker: one identity, then churning identities.
        s.spawn(|| {
            for _ in 0..params.flood {
                layer.malformed(b"uid:6667");
            }
            for i in 0..params.churn {
                layer.malformed(format!("uid:{}", 100_000 + i).as_bytes());
            }
        });
        // The control plane brings up its wave at the same time.
        for _ in 0..wave {
            match layer.mint(b"uid:0") {
                MintAnswer::Minted => run.mints_admitted += 1,
                MintAnswer::Busy { retry_after_secs } => {
                    run.mints_throttled += 1;
                    run.retry_min_secs = Some(
                        run.retry_min_secs
                            .map_or(retry_after_secs, |m| m.min(retry_after_secs)),
                    );
                    run.retry_max_secs = Some(
                        run.retry_max_secs
                            .map_or(retry_after_secs, |m| m.max(retry_after_secs)),
                    );
                }
            }
        }
    });
    // Relaxed: the scope above joined every thread that counted, which orders their counts
    // before these loads.
    run.intents = layer.records.intents.load(Ordering::Relaxed);
    run.outcomes = layer.records.outcomes.load(Ordering::Relaxed);
    if let Some(l) = &layer.limiter {
        run.limited_predecision = l.sink().count(Bucket::PredecisionRefusal);
        run.limited_admission = l.sink().count(Bucket::Admission);
        run.live_entries = Some((l.len(), l.cap()));
        run.memory_bytes = Some(l.memory_bytes());
    }
    Ok(run)
}

/// The summary table.
pub fn table(params: &Params, runs: &[Run]) -> Table {
    let mut t = Table::new(
        "registrar",
        HEADING,
        runs.iter().map(|r| r.label.clone()).collect(),
    );
    let each = |f: &dyn Fn(&Run) -> Cell| runs.iter().map(f).collect::<Vec<_>>();
    let none = || Cell::Text("-".into());
    t.row(
        "malformed invocations sent",
        "malformed_sent",
        each(&|r| Cell::Count(r.malformed)),
    );
    t.row(
        "intent records written",
        "intent_records",
        each(&|r| Cell::Count(r.intents)),
    );
    t.row(
        "outcome records written",
        "outcome_records",
        each(&|r| Cell::Count(r.outcomes)),
    );
    t.row(
        "mints admitted",
        "mints_admitted",
        each(&|r| Cell::Count(r.mints_admitted)),
    );
    t.row(
        "mints throttled",
        "mints_throttled",
        each(&|r| Cell::Count(r.mints_throttled)),
    );
    t.row(
        "retry_after handed out",
        "retry_after_secs",
        each(&|r| match (r.retry_min_secs, r.retry_max_secs) {
            (Some(lo), Some(hi)) if lo == hi => Cell::Text(format!("{lo} s")),
            (Some(lo), Some(hi)) => Cell::Text(format!("{lo}-{hi} s")),
            _ => Cell::Text("none".into()),
        }),
    );
    t.row(
        "limited: predecision_refusal",
        "limited_predecision_refusal",
        each(&|r| {
            if r.live_entries.is_some() {
                Cell::Count(r.limited_predecision)
            } else {
                none()
            }
        }),
    );
    t.row(
        "limited: admission",
        "limited_admission",
        each(&|r| {
            if r.live_entries.is_some() {
                Cell::Count(r.limited_admission)
            } else {
                none()
            }
        }),
    );
    t.row(
        "live entries / cap",
        "live_entries",
        each(&|r| match r.live_entries {
            Some((live, cap)) => Cell::Text(format!("{live} / {cap}")),
            None => none(),
        }),
    );
    t.row(
        "limiter memory",
        "limiter_memory_bytes",
        each(&|r| r.memory_bytes.map_or_else(none, |b| Cell::Bytes(b as u64))),
    );
    t.note(format!(
        "attacker: {} malformed invocations from one identity, then one from each of {} new \
         identities; control plane: a wave of {} hosts x {} modules = {} mints, concurrently",
        params.flood,
        params.churn,
        params.wave_hosts,
        params.modules_per_host,
        u64::from(params.wave_hosts) * u64::from(params.modules_per_host)
    ));
    t
}
