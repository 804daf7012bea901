//! The volume quota against a sequential reference model.
//!
//! The reference keeps every bucket's window as a full `u64` epoch and its two counts as `u64`,
//! in a map from bucket to words, and states the rules directly: an actor's estimate is the least
//! count over its rows in the current window, a charge is admitted if the estimate plus the
//! charge fits the limit, and then every row is raised to `max(row, estimate + charge)`. The
//! documented stamp aliasing (a word from exactly 65,536·j windows ago reads as current) is
//! written out as a rule rather than inherited from a packing. Bucket indexes come from the
//! real limiter: the model checks the counting, not the hash.
//!
//! The driver runs an op sequence through both and asserts identical answers, then the
//! spec-level invariants that do not depend on either formulation (module docs of
//! `crate::quota`): per actor and window, admitted never exceeds the largest limits its
//! charges decided under, whatever order the changes and the readings came in; no
//! admitted charge is ever missing from the actor's estimate; no word exceeds its limit; in
//! any span of one window of a monotonic history an actor gets at most twice the limit;
//! whatever the readings, an actor's total is at most the limit per window up to the newest
//! counted one, which is never beyond the clock plus the tolerance; a refusal's wait ends
//! exactly when the window turns.
//!
//! The driver's clock is the latest reading the history has reached: it never goes back
//! (`StepBack` hands an older reading, as a lagging thread would, without moving the clock).
//! `Ahead` hands a reading ahead of that clock; the model expects exactly the horizon's rule,
//! a refusal iff the reading is more than [`READING_TOLERANCE_NS`] ahead, and then no state
//! change at all: not the header, not a word, not the reference.

use super::bytes::ByteReader;
use crate::clock::{ManualClock, READING_TOLERANCE_NS};
use crate::quota::{Quota, RateLimit, RateLimitRefused, VolumeExceeded, VolumeLimit};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Windows after which a stamp repeats (the documented aliasing period).
const ALIAS_PERIOD: u64 = 65_536;

/// A limiter's settings for one history: the quota, plus the geometry and keys that decide
/// which actors collide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaParams {
    pub events: u32,
    pub bytes: u32,
    pub window_ns: u64,
    pub rows: usize,
    pub buckets: usize,
    pub keys: (u64, u64),
    /// Distinct actor names drawn from: `actor-0 .. actor-{actors - 1}`.
    pub actors: u8,
}

/// One step of a history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaOp {
    /// The reading moves forward.
    Advance { ns: u64 },
    /// The reading moves forward by whole windows (reaches the stamp's aliasing period).
    AdvanceWindows { n: u32 },
    /// The reading moves back (a clock step, or a racing thread's older reading).
    StepBack { ns: u64 },
    /// One write by `actor % actors` of `bytes` bytes.
    Charge { actor: u8, bytes: u64 },
    /// `bytes` more bytes of a write already counted (`RateLimit::try_acquire_bytes`): no
    /// event.
    ChargeBytes { actor: u8, bytes: u64 },
    /// One write, as [`QuotaOp::Charge`], by a charge that loaded the limits before the latest
    /// change was stored and counts after it: decided wholly under the limits before it.
    StaleCharge { actor: u8, bytes: u64 },
    /// Peek at an actor's usage.
    Peek { actor: u8 },
    /// A charge (or, with `peek`, a usage query) at a reading `ns` ahead of the clock:
    /// refused, changing nothing, iff `ns > READING_TOLERANCE_NS`.
    Ahead { actor: u8, ns: u64, peek: bool },
    /// The limits change at runtime to `events` and `bytes` (with `window_too`, to another
    /// window as well, which is refused and changes nothing).
    SetLimits {
        events: u32,
        bytes: u32,
        window_too: bool,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RefWord {
    epoch: u64,
    events: u64,
    bytes: u64,
}

impl RefWord {
    /// The counts (events, bytes) this word holds in window `epoch`: its own if it was written
    /// in that window or in one an exact multiple of 65,536 windows earlier (the documented
    /// aliasing), else none.
    fn read(self, epoch: u64) -> (u64, u64) {
        if self.epoch % ALIAS_PERIOD == epoch % ALIAS_PERIOD {
            (self.events, self.bytes)
        } else {
            (0, 0)
        }
    }
}

/// The reference limiter.
#[derive(Debug, Clone)]
pub struct RefQuota {
    events: u64,
    bytes: u64,
    window: u64,
    /// Bucket index → its word; absent means never written.
    words: HashMap<usize, RefWord>,
    /// The newest window any charge has counted in.
    latest: u64,
}

/// What the reference answered to a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefCharge {
    Admitted {
        epoch: u64,
    },
    Refused {
        limit: VolumeLimit,
        used: u64,
        turns_in_ns: u128,
    },
}

impl RefQuota {
    pub fn new(p: &QuotaParams) -> Self {
        Self {
            events: u64::from(p.events),
            bytes: u64::from(p.bytes),
            window: p.window_ns,
            words: HashMap::new(),
            latest: 0,
        }
    }

    /// The window a reading counts in: its own, or the newest used if that is later.
    pub fn epoch(&self, now: u64) -> u64 {
        (now / self.window).max(self.latest)
    }

    fn turns_in(&self, epoch: u64, now: u64) -> u128 {
        (u128::from(epoch) + 1) * u128::from(self.window) - u128::from(now)
    }

    fn estimate(&self, indexes: &[usize], epoch: u64) -> (u64, u64) {
        let words = |i: &usize| self.words.get(i).copied().unwrap_or_default();
        let events = indexes.iter().map(|i| words(i).read(epoch).0).min();
        let bytes = indexes.iter().map(|i| words(i).read(epoch).1).min();
        (events.unwrap_or(0), bytes.unwrap_or(0))
    }

    /// Counts `events` (1 for a write, 0 for more bytes of one) and `bytes`.
    pub fn charge(&mut self, indexes: &[usize], events: u64, bytes: u64, now: u64) -> RefCharge {
        let epoch = self.epoch(now);
        self.latest = epoch;
        let (est_events, est_bytes) = self.estimate(indexes, epoch);
        let turns_in_ns = self.turns_in(epoch, now);
        let refused = |limit, used| RefCharge::Refused {
            limit,
            used,
            turns_in_ns,
        };
        if bytes > self.bytes {
            return refused(VolumeLimit::Bytes, est_bytes);
        }
        if est_events + events > self.events {
            return refused(VolumeLimit::Events, est_events);
        }
        // A write of no bytes is judged on events alone: it adds nothing to a bytes count that
        // a lowered limit left above the limit.
        if bytes > 0 && est_bytes + bytes > self.bytes {
            return refused(VolumeLimit::Bytes, est_bytes);
        }
        // Every row's word is now of this window and counts at least the estimates plus the
        // charge of both limits (a charge of no bytes leaves a row's bytes as they read, as the
        // estimate is their least).
        for i in indexes {
            let w = self.words.entry(*i).or_default();
            let (ev, by) = w.read(epoch);
            *w = RefWord {
                epoch,
                events: ev.max(est_events + events),
                bytes: by.max(est_bytes + bytes),
            };
        }
        RefCharge::Admitted { epoch }
    }

    /// The limits change: every word keeps its count (see "Limits changed at runtime" in
    /// `quota/reconfig.rs`); only the admission check's bounds move.
    pub fn set_limits(&mut self, events: u32, bytes: u32) {
        self.events = u64::from(events);
        self.bytes = u64::from(bytes);
    }

    /// Estimated events and bytes, and nanoseconds until the window turns, at `now`.
    pub fn usage(&self, indexes: &[usize], now: u64) -> (u64, u64, u128) {
        let epoch = self.epoch(now);
        let (e, b) = self.estimate(indexes, epoch);
        (e, b, self.turns_in(epoch, now))
    }
}

/// Decodes fuzzer bytes into settings and an op sequence.
pub fn decode(data: &[u8]) -> (QuotaParams, Vec<QuotaOp>) {
    let mut r = ByteReader::new(data);
    let rows = [1, 2, 4][usize::from(r.u8() % 3)];
    let params = QuotaParams {
        events: u32::from(r.u8() % 8) + 1,
        bytes: u32::from(r.u16() % 64) + 1,
        window_ns: (u64::from(r.u8() % 100) + 1) * 1_000_000,
        rows,
        buckets: rows << (r.u8() % 3),
        keys: (u64::from(r.u32()), u64::from(r.u32())),
        actors: r.u8() % 12 + 1,
    };
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 512 {
        let op = match r.u8() % 12 {
            0 => QuotaOp::Advance {
                ns: u64::from(r.u32()) * 64,
            },
            1 => QuotaOp::Advance {
                ns: u64::from(r.u8()),
            },
            2 => QuotaOp::AdvanceWindows {
                // Now and then exactly the stamp's period, or one either side of it.
                n: match r.u8() % 8 {
                    0 => 65_535 + u32::from(r.u8() % 3),
                    _ => u32::from(r.u16() % 600),
                },
            },
            3 => QuotaOp::StepBack {
                ns: u64::from(r.u32()) * 256,
            },
            4 | 5 => {
                let actor = r.u8();
                let bytes = u64::from(r.u8()) % (u64::from(params.bytes) + 2);
                // One in sixteen (the actor's top bits; the bytes read are as before) loaded
                // the limits before the latest change.
                if actor >= 240 {
                    QuotaOp::StaleCharge { actor, bytes }
                } else {
                    QuotaOp::Charge { actor, bytes }
                }
            }
            6 => QuotaOp::Charge {
                actor: r.u8(),
                bytes: 0,
            },
            7 => QuotaOp::Peek { actor: r.u8() },
            10 => QuotaOp::ChargeBytes {
                actor: r.u8(),
                bytes: u64::from(r.u8()) % (u64::from(params.bytes) + 2),
            },
            11 => QuotaOp::SetLimits {
                events: u32::from(r.u8() % 8) + 1,
                bytes: u32::from(r.u16() % 64) + 1,
                window_too: r.u8().is_multiple_of(8),
            },
            tag => QuotaOp::Ahead {
                actor: r.u8(),
                ns: match r.u8() % 4 {
                    0 => u64::MAX,
                    1 => READING_TOLERANCE_NS,
                    2 => READING_TOLERANCE_NS + 1,
                    _ => u64::from(r.u32()),
                },
                peek: tag == 9,
            },
        };
        ops.push(op);
    }
    (params, ops)
}

/// The `quota` fuzz target's body.
pub fn fuzz_quota(data: &[u8]) {
    let (params, ops) = decode(data);
    run(&params, 0, &ops);
}

/// Per actor: admitted (reading, events, bytes) in the current monotonic segment, for the 2×
/// rule.
type Recent = VecDeque<(u64, u64, u64)>;

/// Runs `ops` through the real limiter and the reference from reading `start_ns`, asserting
/// identical answers and the spec invariants after every step.
pub fn run(p: &QuotaParams, start_ns: u64, ops: &[QuotaOp]) {
    let Ok(quota) = Quota::new(p.events, p.bytes, Duration::from_nanos(p.window_ns))
        .and_then(|q| q.with_rows(p.rows))
    else {
        return;
    };
    let clock = ManualClock::starting_at(start_ns);
    let Some(real) = RateLimit::with_geometry(quota, p.buckets, p.keys, clock.clone()) else {
        return;
    };
    let mut reference = RefQuota::new(p);
    // The limits in force (`cur`), those before the latest change (`prev`, which a charge
    // that loaded them before it decides under), and the largest ever in force (`p` from here
    // on), which bounds what any word counts once limits change at runtime.
    let mut cur = *p;
    let mut prev = *p;
    let mut widest = *p;
    let p = &mut widest;
    let actors = p.actors.max(1);
    let names: Vec<String> = (0..actors).map(|i| format!("actor-{i}")).collect();
    let indexes: Vec<Vec<usize>> = names.iter().map(|n| real.bucket_indexes(n)).collect();
    let mut counted = Counted::default();
    let mut recent: Vec<Recent> = vec![Recent::new(); names.len()];
    let mut now = start_ns;
    // The clock: the latest reading reached, never going back.
    let mut clock_ns = start_ns;
    for (step, op) in ops.iter().enumerate() {
        match *op {
            QuotaOp::Advance { ns } => now = now.saturating_add(ns),
            QuotaOp::AdvanceWindows { n } => {
                now = now.saturating_add(u64::from(n).saturating_mul(p.window_ns))
            }
            QuotaOp::StepBack { ns } => {
                now = now.saturating_sub(ns);
                // The 2× rule speaks of monotonic histories; start a new one.
                recent.iter_mut().for_each(VecDeque::clear);
            }
            QuotaOp::Charge { actor, bytes }
            | QuotaOp::ChargeBytes { actor, bytes }
            | QuotaOp::StaleCharge { actor, bytes } => {
                let events = u32::from(!matches!(op, QuotaOp::ChargeBytes { .. }));
                let a = usize::from(actor % actors);
                // The limits the charge decides under: those it loaded.
                let under = if matches!(op, QuotaOp::StaleCharge { .. }) {
                    prev
                } else {
                    cur
                };
                let limits = quota.with_limits(under.events, under.bytes);
                let (got, torn) = real.charge_traced_under(&limits, &names[a], events, bytes, now);
                assert_eq!(torn, 0, "step {step}: a lone thread tore an attempt");
                reference.set_limits(under.events, under.bytes);
                let want = reference.charge(&indexes[a], u64::from(events), bytes, now);
                reference.set_limits(cur.events, cur.bytes);
                match (got.as_ref().map_err(RateLimitRefused::exceeded), want) {
                    (Ok(&epoch), RefCharge::Admitted { epoch: want_epoch }) => {
                        assert_eq!(epoch, want_epoch, "step {step}: window differs");
                        counted.admit(a, epoch, (u64::from(events), bytes), &under, step);
                        recent[a].push_back((now, u64::from(events), bytes));
                    }
                    (
                        Err(Some(e)),
                        RefCharge::Refused {
                            limit,
                            used,
                            turns_in_ns,
                        },
                    ) => {
                        assert_eq!(e.limit(), limit, "step {step}: limit differs: {e}");
                        assert_eq!(u64::from(e.used()), used, "step {step}: used differs");
                        assert_eq!(e.window_turns_in().as_nanos(), turns_in_ns);
                        check_refusal(e, &under, u64::from(events), bytes, &reference, now);
                    }
                    (got, want) => {
                        panic!("step {step} {op:?} at {now}: got {got:?}, want {want:?}")
                    }
                }
                check_two_windows_rule(&mut recent[a], p, now, step);
            }
            QuotaOp::Peek { actor } => {
                let a = usize::from(actor % actors);
                let got = real.usage_at(&names[a], now).unwrap_or_else(|e| {
                    panic!("step {step}: a reading the clock produced was refused: {e}")
                });
                let (events, bytes, turns_in) = reference.usage(&indexes[a], now);
                assert_eq!(
                    (u64::from(got.events), u64::from(got.bytes)),
                    (events, bytes),
                    "step {step}: usage differs"
                );
                assert_eq!(got.window_turns_in.as_nanos(), turns_in, "step {step}");
            }
            QuotaOp::SetLimits {
                events,
                bytes,
                window_too,
            } => {
                let window = Duration::from_nanos(p.window_ns * if window_too { 2 } else { 1 });
                let Ok(quota) = Quota::new(events, bytes, window).and_then(|q| q.with_rows(p.rows))
                else {
                    continue;
                };
                let before: Vec<_> = names.iter().map(|n| real.usage_at(n, now).ok()).collect();
                let checked = real.check_limits(&quota);
                let got = real.set_limits(quota);
                assert_eq!(got, checked, "step {step}: check_limits disagrees");
                if window_too {
                    assert!(matches!(
                        got,
                        Err(crate::quota::RateLimitConfigError::WindowFixed { .. })
                    ));
                } else {
                    assert_eq!(got, Ok(()), "step {step}");
                    reference.set_limits(events, bytes);
                    prev = cur;
                    cur.events = events;
                    cur.bytes = bytes;
                    p.events = p.events.max(events);
                    p.bytes = p.bytes.max(bytes);
                    assert_eq!(real.quota(), quota, "step {step}");
                }
                // Nothing charged is reset or forgiven by a change.
                let after: Vec<_> = names.iter().map(|n| real.usage_at(n, now).ok()).collect();
                assert_eq!(
                    before, after,
                    "step {step}: a change moved a window's counts"
                );
            }
            QuotaOp::Ahead { actor, ns, peek } => {
                let a = usize::from(actor % actors);
                let reading = clock_ns.saturating_add(ns);
                let before = (real.shards().header(), real.shards().raw_words());
                let refuse = reading - clock_ns > READING_TOLERANCE_NS;
                if peek {
                    let got = real.usage_at(&names[a], reading);
                    match got {
                        Err(e) => {
                            assert!(refuse, "step {step}: {ns} ns ahead refused: {e}");
                            assert_eq!((e.reading_ns(), e.clock_ns()), (reading, clock_ns));
                        }
                        Ok(got) => {
                            assert!(!refuse, "step {step}: {ns} ns ahead answered: {got:?}");
                            let (events, bytes, turns_in) = reference.usage(&indexes[a], reading);
                            assert_eq!(
                                (u64::from(got.events), u64::from(got.bytes)),
                                (events, bytes),
                                "step {step}: usage ahead differs"
                            );
                            assert_eq!(got.window_turns_in.as_nanos(), turns_in, "step {step}");
                        }
                    }
                } else {
                    let (got, torn) = real.charge_traced(&names[a], 1, 1, reading);
                    assert_eq!(torn, 0, "step {step}: a lone thread tore an attempt");
                    if refuse {
                        let Err(RateLimitRefused::ReadingAhead(e)) = got else {
                            panic!("step {step}: {ns} ns ahead of the clock gave {got:?}");
                        };
                        assert_eq!((e.reading_ns(), e.clock_ns()), (reading, clock_ns));
                        assert!(!e.to_string().is_empty());
                    } else {
                        let want = reference.charge(&indexes[a], 1, 1, reading);
                        match (got, want) {
                            (Ok(epoch), RefCharge::Admitted { epoch: want_epoch }) => {
                                assert_eq!(epoch, want_epoch, "step {step}: window differs");
                                counted.admit(a, epoch, (1, 1), &cur, step);
                            }
                            (Err(RateLimitRefused::Exceeded(_)), RefCharge::Refused { .. }) => {}
                            (got, want) => panic!(
                                "step {step} {op:?} at {reading}: got {got:?}, want {want:?}"
                            ),
                        }
                        // Later readings lag behind this one: the 2x rule speaks of monotonic
                        // histories, so start a new one.
                        recent.iter_mut().for_each(VecDeque::clear);
                    }
                }
                if refuse {
                    let after = (real.shards().header(), real.shards().raw_words());
                    assert!(
                        before == after,
                        "step {step}: a refused reading moved state"
                    );
                }
            }
        }
        if now > clock_ns {
            clock_ns = now;
            clock.set_ns(clock_ns);
        }
        check_state(&real, p, &reference, &names, &counted.admitted, now, step);
        check_totals(p, &reference, &counted.admitted, clock_ns, step);
    }
}

/// Truth: what each actor was admitted, and the bound on it once limits change at runtime.
#[derive(Debug, Default)]
struct Counted {
    /// Admitted (events, bytes) per (actor, window).
    admitted: HashMap<(usize, u64), (u64, u64)>,
    /// Per counted window, the largest limits a charge admitted in it decided under (by any
    /// actor, at any reading, the clock's or one ahead of it within the tolerance): the limits
    /// in force when it loaded them, which a change may have replaced before it counted.
    caps: HashMap<u64, (u64, u64)>,
}

impl Counted {
    /// Counts `(events, bytes)` admitted to actor `a` in window `epoch` under the limits `cur`,
    /// and checks invariant 2 as it stands with limits that change: a window admits an actor
    /// no more than the largest limits its charges decided under, whatever order the readings,
    /// backwards ones included, and the changes came in. (An admission leaves the
    /// actor's estimate, which covers everything it was admitted in the window, within the
    /// limits then in force; one that adds no bytes, or no events, is not judged on them, so a
    /// count a lowered limit left above that limit stays within the earlier, larger one.)
    fn admit(
        &mut self,
        a: usize,
        epoch: u64,
        (events, bytes): (u64, u64),
        cur: &QuotaParams,
        step: usize,
    ) {
        let t = self.admitted.entry((a, epoch)).or_default();
        t.0 += events;
        t.1 += bytes;
        let cap = self.caps.entry(epoch).or_default();
        *cap = (
            cap.0.max(u64::from(cur.events)),
            cap.1.max(u64::from(cur.bytes)),
        );
        assert!(
            t.0 <= cap.0 && t.1 <= cap.1,
            "step {step}: actor {a} admitted {t:?} in window {epoch}, above the largest \
             limits {cap:?} its charges decided under"
        );
    }
}

/// The bound that holds whatever the readings: no window beyond the clock plus the tolerance
/// is ever counted in, and an actor's total is at most the limit per window up to the newest.
fn check_totals(
    p: &QuotaParams,
    reference: &RefQuota,
    admitted: &HashMap<(usize, u64), (u64, u64)>,
    clock_ns: u64,
    step: usize,
) {
    let newest = reference.latest;
    assert!(
        newest <= clock_ns.saturating_add(READING_TOLERANCE_NS) / p.window_ns,
        "step {step}: window {newest} counted in, beyond the clock at {clock_ns} ns"
    );
    let mut totals: HashMap<usize, (u64, u64)> = HashMap::new();
    for (&(a, _), &(events, bytes)) in admitted {
        let t = totals.entry(a).or_default();
        t.0 += events;
        t.1 += bytes;
    }
    let windows = u128::from(newest) + 1;
    for (a, (events, bytes)) in totals {
        assert!(
            u128::from(events) <= windows * u128::from(p.events)
                && u128::from(bytes) <= windows * u128::from(p.bytes),
            "step {step}: actor {a} admitted ({events}, {bytes}) over {windows} windows"
        );
    }
}

/// Invariants 2 (no lost charge) and 3 (no word above its limit), and the header.
fn check_state(
    real: &RateLimit<ManualClock>,
    p: &QuotaParams,
    reference: &RefQuota,
    names: &[String],
    admitted: &HashMap<(usize, u64), (u64, u64)>,
    now: u64,
    step: usize,
) {
    assert_eq!(
        real.shards().header(),
        reference.latest,
        "step {step}: header"
    );
    for w in real.shards().raw_words() {
        assert!(
            crate::quota::word::events(w) <= p.events && crate::quota::word::bytes(w) <= p.bytes,
            "step {step}: a word exceeds its limit: {w:#x}"
        );
    }
    let epoch = reference.epoch(now);
    for (a, name) in names.iter().enumerate() {
        let Some(&(events, bytes)) = admitted.get(&(a, epoch)) else {
            continue;
        };
        let usage = real
            .usage_at(name, now)
            .unwrap_or_else(|e| panic!("step {step}: {e}"));
        assert!(
            u64::from(usage.events) >= events && u64::from(usage.bytes) >= bytes,
            "step {step}: actor {a} lost a charge: estimate {usage:?} < admitted ({events}, {bytes})"
        );
    }
}

/// Invariant 7: the refusal's numbers, and that its wait ends exactly at the window's turn.
fn check_refusal(
    e: &VolumeExceeded,
    p: &QuotaParams,
    events: u64,
    bytes: u64,
    r: &RefQuota,
    now: u64,
) {
    let max = match e.limit() {
        VolumeLimit::Events => p.events,
        VolumeLimit::Bytes => p.bytes,
    };
    assert_eq!(e.max(), max);
    let requested = match e.limit() {
        VolumeLimit::Events => events,
        VolumeLimit::Bytes => bytes,
    };
    assert_eq!(e.requested(), requested);
    assert_eq!(e.is_permanent(), requested > u64::from(max));
    assert_eq!(e.window(), Duration::from_nanos(p.window_ns));
    let wait = u64::try_from(e.window_turns_in().as_nanos()).unwrap_or(u64::MAX);
    assert!(wait > 0, "a refusal must never say the window turns now");
    let epoch = r.epoch(now);
    let turn = now.saturating_add(wait);
    if turn < u64::MAX {
        assert_eq!(
            r.epoch(turn - 1),
            epoch,
            "the window turned before the wait ended"
        );
        assert_eq!(
            r.epoch(turn),
            epoch + 1,
            "the window had not turned when the wait ended"
        );
    }
    assert!(!e.to_string().is_empty());
}

/// The window rule: in a monotonic history, an actor's admitted writes with readings in any
/// closed span of one window total at most twice each limit.
fn check_two_windows_rule(recent: &mut Recent, p: &QuotaParams, now: u64, step: usize) {
    while recent
        .front()
        .is_some_and(|&(t, _, _)| t < now.saturating_sub(p.window_ns))
    {
        recent.pop_front();
    }
    let events: u64 = recent.iter().map(|&(_, e, _)| e).sum();
    let bytes: u64 = recent.iter().map(|&(_, _, b)| b).sum();
    assert!(
        events <= 2 * u64::from(p.events) && bytes <= 2 * u64::from(p.bytes),
        "step {step}: {events} events / {bytes} bytes within one window span"
    );
}
