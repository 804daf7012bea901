//! Scenario 3 (seed 002): how much each kind of actor turns into permanent storage, with no
//! defence, with volume quotas of one, two and four hash rows, and with the volume quota keyed
//! by the claim beside a rate limit keyed by the source. Then the case where that composition
//! costs something: honest claims behind one shared address (a NAT).
//!
//! Time is a `ManualClock` the writer moves forward by one arrival interval per write, so the
//! run's duration D is the number of writes over the stated arrival rate, whatever the
//! machine's speed, and every bound below is computed from it.

use crate::progress::Phase;
use crate::report::{render_bytes, Cell, Table};
use admit::gate::{Admission, Gate, Limit};
use admit::quota::{Quota, RateLimit, BUCKETS};
use admit::{BucketConfig, Limiter, ManualClock};
use std::collections::HashSet;
use std::sync::{mpsc, Barrier};
use std::time::Duration;

pub const HEADING: &str =
    "quota: abusive sessions, honest actors, a name-rotating attacker (seed 002)";

pub const NAT_HEADING: &str = "quota: honest claims behind one shared address (a NAT)";

/// The column of the volume quota by the claim beside a rate limit by the source.
pub const COMPOSED: &str = "claim quota + source limit";

/// A rate limit keyed by the source: each source's rate R and burst B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLimit {
    /// R, tokens a second (must divide 1,000,000).
    pub per_second: u32,
    /// B.
    pub burst: u32,
}

impl SourceLimit {
    pub fn config(&self) -> Result<BucketConfig, String> {
        BucketConfig::per_second(self.per_second)
            .and_then(|c| c.with_burst(self.burst))
            .map_err(|e| format!("source limit {self}: {e}"))
    }

    /// The most requests one source is admitted over `d`: its burst and what refills in `d`,
    /// rounded up (B + R·D).
    pub fn admits_over(&self, d: Duration) -> u64 {
        let refilled = (u128::from(self.per_second) * d.as_nanos()).div_ceil(1_000_000_000);
        u64::from(self.burst).saturating_add(u64::try_from(refilled).unwrap_or(u64::MAX))
    }

    /// S × (B + R·D) × `largest_write`: the most `sources` sources store over `d`.
    pub fn bound_bytes(&self, sources: u32, d: Duration, largest_write: u64) -> u64 {
        u64::from(sources)
            .saturating_mul(self.admits_over(d))
            .saturating_mul(largest_write)
    }

    /// This limit `n` times over: rate and burst.
    fn times(&self, n: u32) -> Self {
        Self {
            per_second: self.per_second.saturating_mul(n),
            burst: self.burst.saturating_mul(n),
        }
    }
}

impl std::fmt::Display for SourceLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/s, burst {}", self.per_second, self.burst)
    }
}

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
    /// Arrivals a second: the clock moves `1 / writes_per_sec` per write.
    pub writes_per_sec: u32,
    /// The addresses the rotating attacker spreads its names over (S).
    pub attacker_sources: u32,
    /// The composition's rate limit per source.
    pub source_limit: SourceLimit,
    /// Honest claims behind the one shared address of the NAT table.
    pub nat_claims: u32,
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
            writes_per_sec: 100_000,
            attacker_sources: 4,
            source_limit: SourceLimit {
                per_second: 10,
                burst: 32,
            },
            nat_claims: 200,
        }
    }
}

impl Params {
    /// The clock's step per write.
    fn interval_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.writes_per_sec.max(1))
    }

    fn writes(&self) -> u64 {
        u64::from(self.abusive) * u64::from(self.abusive_writes)
            + u64::from(self.honest) * u64::from(self.honest_writes)
            + u64::from(self.rotating)
    }

    /// D: every write, one interval each.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.writes().saturating_mul(self.interval_ns()))
    }

    /// The composition's limiter cap: one entry for every source of the run (each abusive
    /// session's, each honest actor's, the attacker's), so that no source ever pays the
    /// shared overflow bucket.
    pub fn source_cap(&self) -> usize {
        (self.abusive as usize) + (self.honest as usize) + (self.attacker_sources as usize)
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
    /// The largest write the rotating attacker made.
    pub rotating_largest_write: u64,
    pub memory_bytes: Option<usize>,
    /// The clock's reading at the end: D.
    pub duration: Duration,
    /// The composition's rate limit per source, in its column.
    pub source_limit: Option<SourceLimit>,
}

impl Run {
    /// S × (B + R·D) × largest write, in the composition's column.
    pub fn bound_bytes(&self, params: &Params) -> Option<u64> {
        self.source_limit.map(|l| {
            l.bound_bytes(
                params.attacker_sources,
                self.duration,
                self.rotating_largest_write,
            )
        })
    }
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
    source: u64,
    bytes: u64,
}

/// What a column runs: nothing, a volume quota keyed by the name, or the composition.
#[derive(Clone, Copy)]
enum Kind {
    None,
    Volume(Quota),
    Composed(Quota, SourceLimit),
}

/// A column's defence, built on the run's clock.
enum Defence {
    None,
    Volume(RateLimit<ManualClock>),
    Composed(Gate<ManualClock>),
}

impl Defence {
    fn build(kind: Kind, clock: &ManualClock, cap: usize) -> Result<(Self, Option<usize>), String> {
        Ok(match kind {
            Kind::None => (Self::None, None),
            Kind::Volume(quota) => {
                let volume = RateLimit::with_clock(quota, clock.clone());
                let memory = volume.memory_bytes();
                (Self::Volume(volume), Some(memory))
            }
            Kind::Composed(quota, limit) => {
                let (gate, memory) = composed(quota, limit, clock, cap)?;
                (Self::Composed(gate), Some(memory))
            }
        })
    }

    fn admits(&self, claim: &str, source: u64, bytes: u64, now_ns: u64) -> bool {
        match self {
            Self::None => true,
            Self::Volume(volume) => volume.try_acquire_at(claim, bytes, now_ns).is_ok(),
            Self::Composed(gate) => gate
                .try_admit_at(&Admission::new(claim, &source).bytes(bytes), now_ns)
                .is_ok(),
        }
    }
}

/// The volume quota keyed by the claim and a rate limit keyed by the source (the gate's
/// defaults for each), with the memory both take.
fn composed(
    quota: Quota,
    limit: SourceLimit,
    clock: &ManualClock,
    cap: usize,
) -> Result<(Gate<ManualClock>, usize), String> {
    let limiter = Limiter::builder()
        .cap(cap)
        .build_with_clock([limit.config()?], clock.clone())
        .map_err(|e| format!("source limiter (cap {cap}): {e}"))?;
    let volume = RateLimit::with_clock(quota, clock.clone());
    let memory = limiter.memory_bytes() + volume.memory_bytes();
    let gate = Gate::new()
        .rates(limiter, [Limit::new("per source", 0)])
        .map_err(|e| e.to_string())?
        .volume(volume);
    Ok((gate, memory))
}

pub fn run(params: &Params) -> Result<Vec<Run>, String> {
    let with_rows = |rows| Quota::default().with_rows(rows).map_err(|e| e.to_string());
    let mut variants: Vec<(String, Kind)> = vec![
        ("no defence".into(), Kind::None),
        (
            "admit defaults (4 rows)".into(),
            Kind::Volume(with_rows(Quota::DEFAULT_ROWS)?),
        ),
        ("1 row".into(), Kind::Volume(with_rows(1)?)),
        ("2 rows".into(), Kind::Volume(with_rows(2)?)),
        (
            COMPOSED.into(),
            Kind::Composed(Quota::default(), params.source_limit),
        ),
    ];
    if let Some(quota) = params.quota {
        variants.push((
            format!(
                "your quota ({}/{} B per {:?})",
                quota.events(),
                quota.bytes(),
                quota.window()
            ),
            Kind::Volume(quota),
        ));
    }
    variants
        .into_iter()
        .map(|(label, kind)| {
            let phase = Phase::start(&format!("quota: {label}"));
            let run = run_once(params, &label, kind);
            phase.finish();
            run
        })
        .collect()
}

fn run_once(params: &Params, label: &str, kind: Kind) -> Result<Run, String> {
    let clock = ManualClock::new();
    let (defence, memory_bytes) = Defence::build(kind, &clock, params.source_cap())?;
    let mut run = Run {
        label: label.to_string(),
        memory_bytes,
        source_limit: match kind {
            Kind::Composed(_, limit) => Some(limit),
            Kind::None | Kind::Volume(_) => None,
        },
        ..Run::default()
    };
    let interval_ns = params.interval_ns();
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
                        source: abusive_source(session),
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
                        source: honest_source(actor),
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
                    source: attacker_source(name % params.attacker_sources.max(1)),
                    bytes: params.big_write,
                };
                if tx_rotating.send(w).is_err() {
                    return;
                }
            }
        });
        drop(tx);
        // The writer: one thread deciding every write, as the seed's single writer does. Each
        // write arrives one interval after the one before.
        let mut per_session = vec![0u64; params.abusive as usize];
        let mut refused_honest: HashSet<u64> = HashSet::new();
        for w in rx {
            let now = clock.advance_ns(interval_ns);
            let name = actor_name(w.class, w.actor);
            let stored = defence.admits(name.as_str(), w.source, w.bytes, now);
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
            if let Class::Rotating = w.class {
                run.rotating_largest_write = run.rotating_largest_write.max(w.bytes);
            }
        }
        run.abusive_max_session_bytes = per_session.into_iter().max().unwrap_or(0);
        run.honest_refused_actors = refused_honest.len() as u64;
    });
    run.duration = Duration::from_nanos(admit::Clock::now_ns(&clock));
    Ok(run)
}

/// Each abusive session writes from an address of its own.
fn abusive_source(session: u32) -> u64 {
    u64::from(session)
}

/// Each honest actor writes from an address of its own.
fn honest_source(actor: u32) -> u64 {
    1_000_000 + u64::from(actor)
}

/// The rotating attacker's addresses, S of them.
fn attacker_source(i: u32) -> u64 {
    100_000_000 + u64::from(i)
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
        "  bound: S x (B + R·D) x largest write",
        "rotating_bound_bytes",
        each(&|r| {
            r.bound_bytes(params)
                .map_or_else(|| Cell::Text("none".into()), Cell::Bytes)
        }),
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
    let d = params.duration();
    t.note(format!(
        "timeline: a ManualClock moved {} ns per write ({} writes/s), so D = {:.1} s; each \
         abusive session and each honest actor writes from an address of its own, the rotating \
         attacker from S = {} addresses",
        params.interval_ns(),
        params.writes_per_sec,
        d.as_secs_f64(),
        params.attacker_sources
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
    let limit = params.source_limit;
    t.note(format!(
        "{COMPOSED}: the default quota keyed by the claim, and per source R = {}/s, burst B = \
         {} (B >= an honest actor's {} writes, so its own address never refuses it); the \
         limiter's cap, {}, holds every source of the run, so none pays the shared overflow \
         bucket",
        limit.per_second,
        limit.burst,
        params.honest_writes,
        params.source_cap()
    ));
    let composed = runs.iter().find(|r| r.source_limit.is_some());
    let claim_only = runs.iter().find(|r| r.label.starts_with("admit defaults"));
    if let (Some(c), Some(alone)) = (composed, claim_only) {
        let bound = c.bound_bytes(params).unwrap_or(0);
        t.note(format!(
            "the rotating attacker under {COMPOSED} stored {} <= S x (B + R·D) x largest \
             write = {} x ({} + {}/s x {:.1} s) x {} B = {}: {} of the {} it stored under the \
             claim quota alone",
            render_bytes(c.rotating_bytes),
            params.attacker_sources,
            limit.burst,
            limit.per_second,
            c.duration.as_secs_f64(),
            c.rotating_largest_write,
            render_bytes(bound),
            ratio(c.rotating_bytes, alone.rotating_bytes),
            render_bytes(alone.rotating_bytes)
        ));
    }
    t
}

/// `part / whole` as "1/N" (or "none" and "all").
fn ratio(part: u64, whole: u64) -> String {
    match (part, whole) {
        (0, _) => "none".into(),
        (_, 0) => "all".into(),
        (p, w) if p >= w => "all".into(),
        (p, w) => format!("1/{:.0}", w as f64 / p as f64),
    }
}

/// One column of the NAT table.
#[derive(Debug, Clone)]
pub struct NatRun {
    pub label: String,
    /// The limit on the NAT's address.
    pub nat_limit: SourceLimit,
    /// The limit on every other address (the rotating attacker's).
    pub others_limit: SourceLimit,
    pub admitted: u64,
    pub refused: u64,
    pub claims_refused: u64,
    /// The fewest writes any claim behind the NAT had admitted.
    pub fewest_kept: u64,
    /// S × (B + R·D) × the attacker's write, at the others' limit.
    pub attacker_bound: u64,
}

/// The NAT case: `nat_claims` honest claims behind one address, each writing `honest_writes`
/// small writes spread evenly over the main run's D, under three ways of setting the source
/// limit. Decided in one thread on a `ManualClock`: the order is the arrival order.
pub fn nat(params: &Params) -> Result<Vec<NatRun>, String> {
    let base = params.source_limit;
    let shared = base.times(params.nat_claims);
    let variants = [
        ("per-address limit".to_string(), base, base),
        (
            format!("every address x {}", params.nat_claims),
            shared,
            shared,
        ),
        (
            format!("the NAT's address x {}", params.nat_claims),
            shared,
            base,
        ),
    ];
    variants
        .into_iter()
        .map(|(label, nat_limit, others_limit)| nat_once(params, label, nat_limit, others_limit))
        .collect()
}

fn nat_once(
    params: &Params,
    label: String,
    nat_limit: SourceLimit,
    others_limit: SourceLimit,
) -> Result<NatRun, String> {
    let clock = ManualClock::new();
    // The NAT's address decides through a gate of its own limit (one source: a tiny cap).
    let (gate, _) = composed(Quota::default(), nat_limit, &clock, 64)?;
    let claims = params.nat_claims.max(1);
    let writes = u64::from(claims) * u64::from(params.honest_writes);
    let d = params.duration();
    let step = u64::try_from(d.as_nanos() / u128::from(writes.max(1))).unwrap_or(u64::MAX);
    let nat_address = 7u64;
    let mut kept = vec![0u64; claims as usize];
    let mut run = NatRun {
        label,
        nat_limit,
        others_limit,
        admitted: 0,
        refused: 0,
        claims_refused: 0,
        fewest_kept: 0,
        attacker_bound: others_limit.bound_bytes(params.attacker_sources, d, params.big_write),
    };
    let mut refused_claims: HashSet<u32> = HashSet::new();
    for k in 0..writes {
        let now = clock.advance_ns(step);
        let claim = u32::try_from(k % u64::from(claims)).unwrap_or(0);
        let name = format!("nat-user-{claim}");
        let admission = Admission::new(name.as_str(), &nat_address).bytes(params.small_write);
        if gate.try_admit_at(&admission, now).is_ok() {
            run.admitted += 1;
            if let Some(n) = kept.get_mut(claim as usize) {
                *n += 1;
            }
        } else {
            run.refused += 1;
            refused_claims.insert(claim);
        }
    }
    run.claims_refused = refused_claims.len() as u64;
    run.fewest_kept = kept.into_iter().min().unwrap_or(0);
    Ok(run)
}

pub fn nat_table(params: &Params, runs: &[NatRun]) -> Table {
    let mut t = Table::new(
        "quota_nat",
        NAT_HEADING,
        runs.iter().map(|r| r.label.clone()).collect(),
    );
    let each = |f: &dyn Fn(&NatRun) -> Cell| runs.iter().map(f).collect::<Vec<_>>();
    t.row(
        "limit on the NAT's address",
        "nat_limit",
        each(&|r| Cell::Text(r.nat_limit.to_string())),
    );
    t.row(
        "limit on every other address",
        "others_limit",
        each(&|r| Cell::Text(r.others_limit.to_string())),
    );
    t.row(
        "honest writes admitted",
        "honest_writes_admitted",
        each(&|r| Cell::Count(r.admitted)),
    );
    t.row(
        "honest writes refused",
        "honest_writes_refused",
        each(&|r| Cell::Count(r.refused)),
    );
    t.row(
        "  claims refused at least once",
        "claims_refused",
        each(&|r| Cell::Count(r.claims_refused)),
    );
    t.row(
        "  fewest writes a claim kept",
        "fewest_writes_kept",
        each(&|r| Cell::Count(r.fewest_kept)),
    );
    t.row(
        "rotating attacker's bound at these limits",
        "rotating_bound_bytes",
        each(&|r| Cell::Bytes(r.attacker_bound)),
    );
    let d = params.duration();
    let writes = u64::from(params.nat_claims) * u64::from(params.honest_writes);
    t.note(format!(
        "{} honest claims behind one address, each {} writes of {} B spread evenly over D = \
         {:.1} s: {:.0} writes/s from the address, against R = {}/s, burst B = {} per address \
         (the quota table's {COMPOSED})",
        params.nat_claims,
        params.honest_writes,
        params.small_write,
        d.as_secs_f64(),
        writes as f64 / d.as_secs_f64().max(1e-9),
        params.source_limit.per_second,
        params.source_limit.burst
    ));
    t.note(format!(
        "to keep their share, give an address N x the per-address limit, N the most honest \
         claims it carries (here {}): each claim then gets what an address of its own gets. \
         Given to every address, that multiplies the rotating attacker's bound by about N; \
         given only to the addresses known to be shared (a gate of their own limit), it \
         leaves the bound as it was",
        params.nat_claims
    ));
    t
}
