//! The adaptive total: a writer whose apply cost changes (fast, slow, fast again, then a full
//! stall) under a thousand honest actors pipelining up to their quota, and a human in the
//! critical class; with the adaptive total, with none, and with static caps sized for the fast
//! and for the slow phase.
//!
//! Simulated time, not wall time: every event (a submission, a retry, the writer's decision) is
//! taken from a queue in time order and the quotas read a `ManualClock` set to the event's
//! moment, so a run is deterministic, takes well under a second, and the writer's cost is
//! exactly the stated one. The quotas are the real ones.

use crate::report::{percentile, Cell, Table};
use admit::fairness::{
    AdaptivePermit, AdaptiveQuotas, AdaptiveTotal, Permit, Priority, Quotas, QuotasRefused,
};
use admit::{Clock, ManualClock};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

pub const HEADING: &str =
    "adaptive: a writer slowing 10x and back, then stalling, under 1,000 honest actors and a human";

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    /// Honest actors: the first half normal, the second sheddable.
    pub actors: u32,
    /// Each actor's quota, which it fills: it pipelines up to Q ops.
    pub quota: u32,
    /// The adaptive total's target latency.
    pub target: Duration,
    /// Each phase's apply cost and length.
    pub phases: Vec<(Duration, Duration)>,
    /// The first part of each phase, reported apart: ops admitted before the change drain at
    /// the new cost.
    pub settling: Duration,
    /// The full stall after the last phase.
    pub stall: Duration,
    /// A client learns of a decision this long after it (and only then submits again).
    pub round_trip: Duration,
    /// A refused actor retries after this (plus up to 1 ms, by actor).
    pub retry: Duration,
    /// The human submits one critical op this often (and retries after 1 ms if refused).
    pub human_interval: Duration,
}

impl Default for Params {
    fn default() -> Self {
        let phase = Duration::from_secs(2);
        Self {
            actors: 1_000,
            quota: 32,
            target: Duration::from_millis(2),
            phases: vec![
                (Duration::from_micros(50), phase),
                (Duration::from_micros(500), phase),
                (Duration::from_micros(50), phase),
            ],
            settling: Duration::from_millis(100),
            stall: Duration::from_millis(100),
            round_trip: Duration::from_millis(1),
            retry: Duration::from_millis(100),
            human_interval: Duration::from_millis(10),
        }
    }
}

/// How a run bounds the total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Total {
    None,
    Adaptive,
    Static(u32),
}

/// One stretch of the timeline and what happened in it.
#[derive(Debug, Clone, Default)]
pub struct Segment {
    pub name: String,
    pub start: u64,
    pub end: u64,
    /// Whether a steady phase (held to the targets) rather than a settling or a stall.
    pub steady: bool,
    pub human_waits: Vec<Duration>,
    pub human_refused: u64,
    /// Admissions and refusals by class (critical, normal, sheddable).
    pub admitted: [u64; 3],
    pub refused: [u64; 3],
    /// 1 ms bins with a refusal in them, and the writer's busy time in those bins.
    pub refused_bins: u64,
    pub busy_in_refused_bins: u64,
    pub limit: Option<(u32, u32)>,
}

impl Segment {
    /// The writer's busy fraction while anyone was refused (`None` if nobody was).
    pub fn busy_while_refused(&self) -> Option<f64> {
        (self.refused_bins > 0)
            .then(|| self.busy_in_refused_bins as f64 / (self.refused_bins * BIN) as f64)
    }
}

/// One run's measurements.
#[derive(Debug, Clone)]
pub struct Run {
    pub label: String,
    pub total: Total,
    pub segments: Vec<Segment>,
    /// From the stall's start to L's first step down (adaptive only).
    pub stall_detected: Option<Duration>,
}

const BIN: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The writer finishes the op at the head of its queue.
    Decided,
    /// The human submits (or retries) its op, first tried at `since`.
    Human { since: u64 },
    /// An actor learns of a decision (or retries, `retry`): it submits while under its quota.
    Actor { actor: u32, retry: bool },
}

struct Op<'q> {
    actor: Option<u32>,
    submitted: u64,
    _permit: Held<'q>,
}

/// The variant's in-flight count: plain quotas (no total), or adaptive ones (an adaptive or a
/// static total, which is an adaptive one whose floor is its ceiling).
enum Admitter {
    Plain(Quotas),
    Adaptive(AdaptiveQuotas<ManualClock>),
}

/// A permit of either.
enum Held<'q> {
    Plain(#[allow(dead_code)] Permit<'q>),
    Adaptive(#[allow(dead_code)] AdaptivePermit<'q, ManualClock>),
}

impl Admitter {
    /// One op of `actor` in class `priority` (which plain quotas do not read).
    fn try_acquire_as<K: std::hash::Hash + ?Sized>(
        &self,
        actor: &K,
        priority: Priority,
    ) -> Result<Held<'_>, QuotasRefused> {
        match self {
            Self::Plain(quotas) => quotas.try_acquire(actor).map(Held::Plain),
            Self::Adaptive(quotas) => quotas.try_acquire_as(actor, priority).map(Held::Adaptive),
        }
    }

    /// L now, if the variant has a total.
    fn total_limit(&self) -> Option<u32> {
        match self {
            Self::Plain(_) => None,
            Self::Adaptive(quotas) => Some(quotas.limit()),
        }
    }
}

/// Runs the four variants.
pub fn run(params: &Params) -> Vec<Run> {
    let fast = params
        .phases
        .first()
        .map_or(Duration::from_micros(50), |p| p.0);
    let slow = params.phases.iter().map(|p| p.0).max().unwrap_or(fast);
    let cap = |apply: Duration| {
        // The cap at which the normal class's share (500 ‰) queues one target latency.
        let ops = params.target.as_nanos() / apply.as_nanos().max(1);
        u32::try_from(ops * 2).unwrap_or(u32::MAX).max(1)
    };
    let variants = [
        ("adaptive total".to_string(), Total::Adaptive),
        ("no total".to_string(), Total::None),
        (
            format!("static, fast-sized ({})", cap(fast)),
            Total::Static(cap(fast)),
        ),
        (
            format!("static, slow-sized ({})", cap(slow)),
            Total::Static(cap(slow)),
        ),
    ];
    variants
        .into_iter()
        .map(|(label, total)| {
            let phase = crate::progress::Phase::start(&format!("adaptive: {label}"));
            let run = run_once(params, label, total);
            phase.finish();
            run
        })
        .collect()
}

/// The timeline's segments: each phase's settling and steady parts, then the stall.
fn segments(params: &Params) -> (Vec<Segment>, Vec<(u64, u64, u64)>) {
    let names = ["fast", "slow", "fast again"];
    let mut segments = Vec::new();
    let mut costs = Vec::new();
    let mut t = 0u64;
    for (i, &(apply, length)) in params.phases.iter().enumerate() {
        let name = names.get(i).copied().unwrap_or("phase");
        let (length, settling) = (ns(length), ns(params.settling));
        costs.push((t, t + length, ns(apply)));
        let settle_name = if i == 0 {
            "start".to_string()
        } else {
            format!("→ {name}")
        };
        segments.push(Segment {
            name: format!("{settle_name} (first {})", render(params.settling)),
            start: t,
            end: t + settling,
            ..Segment::default()
        });
        segments.push(Segment {
            name: format!("{name} ({} µs/op)", apply.as_micros()),
            start: t + settling,
            end: t + length,
            steady: true,
            ..Segment::default()
        });
        t += length;
    }
    segments.push(Segment {
        name: format!("stall ({})", render(params.stall)),
        start: t,
        end: t + ns(params.stall),
        ..Segment::default()
    });
    (segments, costs)
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn render(d: Duration) -> String {
    if d.as_millis() > 0 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} µs", d.as_micros())
    }
}

fn run_once(params: &Params, label: String, total: Total) -> Run {
    let clock = ManualClock::new();
    let builder = Quotas::builder().quota(params.quota).actors(2_048);
    let built = match total {
        Total::None => builder.build().map(Admitter::Plain),
        Total::Adaptive => {
            let config = AdaptiveTotal::new(params.target).ceiling(1 << 16);
            builder
                .build_adaptive_with_clock(config, clock.clone())
                .map(Admitter::Adaptive)
        }
        Total::Static(cap) => {
            let config = AdaptiveTotal::new(params.target)
                .floor(cap)
                .ceiling(cap)
                .initial(cap);
            builder
                .build_adaptive_with_clock(config, clock.clone())
                .map(Admitter::Adaptive)
        }
    };
    let Ok(quotas) = built else {
        return Run {
            label,
            total,
            segments: Vec::new(),
            stall_detected: None,
        };
    };
    let (mut segments, costs) = segments(params);
    let timeline_end = segments.last().map_or(0, |s| s.end);
    let stall_start = segments.last().map_or(0, |s| s.start);
    let last_cost = costs.last().map_or(50_000, |c| c.2);
    let cost_at = |t: u64| {
        costs
            .iter()
            .find(|&&(s, e, _)| (s..e).contains(&t))
            .map_or(last_cost, |c| c.2)
    };
    let segment_of =
        |t: u64| -> usize { segments_index(t, stall_start, &costs, ns(params.settling)) };
    let mut events: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, t: u64, e: Event| {
        seq += 1;
        events.push(Reverse((t, seq, e)));
    };
    for actor in 0..params.actors {
        push(
            &mut events,
            u64::from(actor) * 1_000,
            Event::Actor {
                actor,
                retry: false,
            },
        );
    }
    push(&mut events, 0, Event::Human { since: 0 });
    let mut own = vec![0u32; params.actors as usize];
    // Whether an actor has a retry pending: a refused actor waits for it, not once per refusal.
    let mut retrying = vec![false; params.actors as usize];
    let mut queue: VecDeque<Op<'_>> = VecDeque::new();
    let mut busy_until: Option<u64> = None;
    let mut busy_bins = vec![0u64; (timeline_end / BIN + 1) as usize];
    let mut refused_bins = vec![false; busy_bins.len()];
    let mut stall_detected = None;
    let mut limit_at_stall = None;
    let mut human_pending = 0u32;
    while let Some(Reverse((t, _, event))) = events.pop() {
        let Some(step) = t.checked_sub(clock.now_ns()) else {
            continue;
        };
        clock.advance_ns(step);
        let open = t < timeline_end;
        if !open && queue.is_empty() && human_pending == 0 {
            break;
        }
        let seg = segment_of(t);
        match event {
            Event::Decided => {
                if let Some(op) = queue.pop_front() {
                    let wait = Duration::from_nanos(t - op.submitted);
                    match op.actor {
                        None => {
                            human_pending = human_pending.saturating_sub(1);
                            if let Some(s) = segments.get_mut(segment_of(op.submitted)) {
                                s.human_waits.push(wait);
                            }
                        }
                        Some(actor) => {
                            if let Some(n) = own.get_mut(actor as usize) {
                                *n = n.saturating_sub(1);
                            }
                            if open {
                                push(
                                    &mut events,
                                    t + ns(params.round_trip),
                                    Event::Actor {
                                        actor,
                                        retry: false,
                                    },
                                );
                            }
                        }
                    }
                    drop(op);
                }
                busy_until = None;
            }
            Event::Human { since } => {
                if open {
                    match quotas.try_acquire_as("human", Priority::Critical) {
                        Ok(permit) => {
                            human_pending += 1;
                            if let Some(s) = segments.get_mut(seg) {
                                s.admitted[0] += 1;
                            }
                            queue.push_back(Op {
                                actor: None,
                                submitted: since,
                                _permit: permit,
                            });
                            let next = since + ns(params.human_interval);
                            push(
                                &mut events,
                                next.max(t + 1),
                                Event::Human {
                                    since: next.max(t + 1),
                                },
                            );
                        }
                        Err(_) => {
                            if let Some(s) = segments.get_mut(seg) {
                                s.refused[0] += 1;
                                s.human_refused += 1;
                            }
                            if let Some(b) = refused_bins.get_mut((t / BIN) as usize) {
                                *b = true;
                            }
                            push(&mut events, t + 1_000_000, Event::Human { since });
                        }
                    }
                }
            }
            Event::Actor { actor, retry } => {
                if retry {
                    if let Some(r) = retrying.get_mut(actor as usize) {
                        *r = false;
                    }
                }
                let class = if actor < params.actors / 2 {
                    Priority::Normal
                } else {
                    Priority::Sheddable
                };
                let c = class_index(class);
                while open && own.get(actor as usize).is_some_and(|&n| n < params.quota) {
                    match quotas.try_acquire_as(&actor, class) {
                        Ok(permit) => {
                            if let Some(n) = own.get_mut(actor as usize) {
                                *n += 1;
                            }
                            if let Some(n) =
                                segments.get_mut(seg).and_then(|s| s.admitted.get_mut(c))
                            {
                                *n += 1;
                            }
                            queue.push_back(Op {
                                actor: Some(actor),
                                submitted: t,
                                _permit: permit,
                            });
                        }
                        Err(_) => {
                            if let Some(n) =
                                segments.get_mut(seg).and_then(|s| s.refused.get_mut(c))
                            {
                                *n += 1;
                            }
                            if let Some(b) = refused_bins.get_mut((t / BIN) as usize) {
                                *b = true;
                            }
                            let jitter = u64::from(actor) * 7_919 % 1_000_000;
                            if let Some(r) = retrying.get_mut(actor as usize).filter(|r| !**r) {
                                *r = true;
                                push(
                                    &mut events,
                                    t + ns(params.retry) + jitter,
                                    Event::Actor { actor, retry: true },
                                );
                            }
                            break;
                        }
                    }
                }
            }
        }
        // The writer takes the next op if idle; a stalled writer starts nothing until the
        // stall ends.
        if busy_until.is_none() && !queue.is_empty() {
            let start = if (stall_start..timeline_end).contains(&t) {
                timeline_end
            } else {
                t
            };
            let done = start + cost_at(start);
            busy_until = Some(done);
            add_busy(&mut busy_bins, start, done);
            push(&mut events, done, Event::Decided);
        }
        if let Some(limit) = quotas.total_limit() {
            if let Some(s) = segments.get_mut(seg).filter(|_| open) {
                let (lo, hi) = s.limit.unwrap_or((limit, limit));
                s.limit = Some((lo.min(limit), hi.max(limit)));
            }
            if t >= stall_start && open {
                let at_stall = *limit_at_stall.get_or_insert(limit);
                if stall_detected.is_none() && limit < at_stall {
                    stall_detected = Some(Duration::from_nanos(t - stall_start));
                }
            }
        }
    }
    for (bin, &refused) in refused_bins.iter().enumerate() {
        if refused {
            let t = bin as u64 * BIN;
            if let Some(s) = segments.get_mut(segment_of(t)) {
                s.refused_bins += 1;
                s.busy_in_refused_bins += busy_bins.get(bin).copied().unwrap_or(0);
            }
        }
    }
    for s in &mut segments {
        s.human_waits.sort();
    }
    Run {
        label,
        total,
        segments,
        stall_detected,
    }
}

/// The index of the segment holding `t` (the stall's for anything after the phases).
fn segments_index(t: u64, stall_start: u64, costs: &[(u64, u64, u64)], settling: u64) -> usize {
    if t >= stall_start {
        return costs.len() * 2;
    }
    costs
        .iter()
        .position(|&(s, e, _)| (s..e).contains(&t))
        .map_or(costs.len() * 2, |i| {
            let (start, _, _) = costs.get(i).copied().unwrap_or_default();
            i * 2 + usize::from(t >= start + settling)
        })
}

fn add_busy(bins: &mut [u64], start: u64, end: u64) {
    let mut t = start;
    while t < end {
        let bin = t / BIN;
        let bin_end = ((bin + 1) * BIN).min(end);
        if let Some(b) = bins.get_mut(bin as usize) {
            *b += bin_end - t;
        }
        t = bin_end;
    }
}

fn class_index(priority: Priority) -> usize {
    match priority {
        Priority::Critical => 0,
        Priority::Normal => 1,
        Priority::Sheddable => 2,
    }
}

/// The targets, checked on the adaptive run: each a line for the notes, and whether all hold.
pub fn targets(params: &Params, adaptive: &Run) -> (Vec<String>, bool) {
    let mut notes = Vec::new();
    let mut ok = true;
    let limit = params.target * 2;
    for s in adaptive.segments.iter().filter(|s| s.steady) {
        let p99 = percentile(&s.human_waits, 99.0);
        let held = p99 <= limit;
        ok &= held;
        notes.push(format!(
            "{} human p99 {} within 2 × target ({}): {}",
            s.name,
            render_us(p99),
            render_us(limit),
            yes(held)
        ));
        let busy = s.busy_while_refused().unwrap_or(1.0);
        ok &= busy >= 0.9;
        notes.push(format!(
            "{} writer busy {:.1} % while anyone is refused (≥ 90 %): {}",
            s.name,
            busy * 100.0,
            yes(busy >= 0.9)
        ));
    }
    let phases = adaptive
        .segments
        .iter()
        .filter(|s| !s.name.starts_with("stall"));
    let (critical, sheddable) =
        phases.fold((0, 0), |(c, sh), s| (c + s.refused[0], sh + s.refused[2]));
    let shed_first = critical == 0 && sheddable > 0;
    ok &= shed_first;
    notes.push(format!(
        "critical refused {critical} times, sheddable {sheddable}, outside the stall: {}",
        yes(shed_first)
    ));
    let bound = params.target * 3 + params.target / 4 + Duration::from_millis(1);
    let detected = adaptive.stall_detected.is_some_and(|d| d <= bound);
    ok &= detected;
    notes.push(format!(
        "full stall detected (L stepped down) after {} (bound: 2 targets of age + a quarter \
         target of bucket + 1 window + 1 ms to the next attempt = {}): {}",
        adaptive.stall_detected.map_or("never".into(), render_us),
        render_us(bound),
        yes(detected)
    ));
    (notes, ok)
}

fn yes(b: bool) -> &'static str {
    if b {
        "met"
    } else {
        "MISSED"
    }
}

fn render_us(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// The human's waits in the steady phases, by variant (for `--svg`).
pub fn human_waits(runs: &[Run]) -> Vec<(String, Vec<Duration>)> {
    runs.iter()
        .map(|r| {
            let mut waits: Vec<Duration> = r
                .segments
                .iter()
                .filter(|s| s.steady)
                .flat_map(|s| s.human_waits.iter().copied())
                .collect();
            waits.sort();
            (r.label.clone(), waits)
        })
        .collect()
}

/// The per-phase table: one column per variant.
pub fn table(params: &Params, runs: &[Run]) -> Table {
    let mut table = Table::new(
        "adaptive",
        HEADING,
        runs.iter().map(|r| r.label.clone()).collect(),
    );
    let Some(first) = runs.first() else {
        return table;
    };
    for (i, seg) in first.segments.iter().enumerate() {
        let key = format!("seg{i}");
        let at = |r: &Run| r.segments.get(i).cloned().unwrap_or_default();
        let each =
            |f: &dyn Fn(&Segment) -> Cell| runs.iter().map(|r| f(&at(r))).collect::<Vec<_>>();
        let name = &seg.name;
        table.row(
            format!("{name}: human wait p50"),
            format!("{key}_human_p50_us"),
            each(&|s| Cell::Time(percentile(&s.human_waits, 50.0))),
        );
        table.row(
            format!("{name}: human wait p99"),
            format!("{key}_human_p99_us"),
            each(&|s| Cell::Time(percentile(&s.human_waits, 99.0))),
        );
        table.row(
            format!("{name}: human wait max"),
            format!("{key}_human_max_us"),
            each(&|s| Cell::Time(s.human_waits.last().copied().unwrap_or_default())),
        );
        table.row(
            format!("{name}: human refused"),
            format!("{key}_human_refused"),
            each(&|s| Cell::Count(s.human_refused)),
        );
        table.row(
            format!("{name}: writer busy while refused"),
            format!("{key}_busy_while_refused"),
            each(&|s| {
                Cell::Text(
                    s.busy_while_refused()
                        .map_or("nobody refused".into(), |b| format!("{:.1} %", b * 100.0)),
                )
            }),
        );
        let classes = |[critical, normal, sheddable]: [u64; 3]| {
            Cell::Text(format!("{critical} / {normal} / {sheddable}"))
        };
        table.row(
            format!("{name}: admitted crit/norm/shed"),
            format!("{key}_admitted"),
            each(&|s| classes(s.admitted)),
        );
        table.row(
            format!("{name}: refused crit/norm/shed"),
            format!("{key}_refused"),
            each(&|s| classes(s.refused)),
        );
        table.row(
            format!("{name}: L min–max"),
            format!("{key}_limit"),
            each(&|s| Cell::Text(s.limit.map_or("-".into(), |(lo, hi)| format!("{lo}–{hi}")))),
        );
    }
    table.note(format!(
        "simulated time on a ManualClock (deterministic): {} actors at Q = {} pipelining (half \
         normal, half sheddable; a decision reaches its client {} later; a refused one retries \
         after {} + up to 1 ms), a human submitting one critical op every {}; target latency {}",
        params.actors,
        params.quota,
        render(params.round_trip),
        render(params.retry),
        render(params.human_interval),
        render(params.target)
    ));
    table.note(
        "no total: the human's own ops, each waiting seconds, fill its own quota, so it is \
         refused by its quota; static caps: L pinned (floor = ceiling), the same code",
    );
    table.note(
        "with 1,000 actors retrying, a small static cap still keeps the writer busy; what it \
         costs shows with few clients whose round trip exceeds the cap's queue (not run here)",
    );
    if let Some(adaptive) = runs.iter().find(|r| r.total == Total::Adaptive) {
        let (notes, _) = targets(params, adaptive);
        for n in notes {
            table.note(n);
        }
    }
    table
}
