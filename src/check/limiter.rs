//! The keyed limiter against a sequential reference: a `HashMap` of reference buckets with the
//! seed's cap rules written out literally, plus one reference overflow bucket per class.

mod reference;

pub use reference::{Answer, RefGrant, RefLimiter};

use super::bytes::ByteReader;
use crate::bucket::{BucketConfig, Refunded};
use crate::clock::{Clock, ManualClock};
use crate::limiter::{InvalidCharge, Limiter, LimiterRefused};

const MS: u64 = 1_000_000;
/// Readings stop a day short of the clamp at `MAX_NOW_TICK` milliseconds (a millisecond
/// limiter counts readings only up to its own last instant, [`LAST_MILLIS_NS`]).
const LAST_READING_NS: u64 = (crate::clock::tick::MAX_NOW_TICK - 86_400_000) * MS;
/// The last instant a millisecond limiter counts, written out: an entry holds its `full_at`
/// absolute in the 41 bits below its era bit, up to a span of 2^40 ms past the reading it was
/// written at, so readings count up to `2^41 − 1 − 2^40` ms (about 34.8 years). The reference
/// is handed every later reading as this instant, which is what every answer of the limiter
/// must count it as (nothing refills past it).
const LAST_MILLIS_NS: u64 = ((1 << 41) - 1 - (1 << 40)) * MS;

/// One step of a limiter history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimiterOp {
    /// Charge `n` tokens of `class` to identity `id`.
    Charge { id: u32, class: u8, n: u8 },
    /// Peek what a charge of `n` would see.
    Peek { id: u32, class: u8, n: u8 },
    /// Time passes.
    Advance { ns: u64 },
    /// The idle sweep.
    Sweep,
    /// The next readings go back by `ns` (a stale reading from another thread), never below 0.
    Back { ns: u64 },
    /// The limiter's clock itself goes back by `ns`, never below 0: later decisions, sweeps
    /// and changes (which read the clock) are made at the backwards clock, while the horizon
    /// keeps the highest bound it reached.
    ClockBack { ns: u64 },
    /// A charge of `id` at a reading `ns` beyond the clock's tolerance: refused, changes
    /// nothing.
    Ahead { id: u32, ns: u64 },
    /// Give back up to `n` tokens of one of the latest grants (`pick` modulo how many are
    /// kept), at the reading of the step (behind the clock after `Back`); with `elsewhere`, on
    /// a twin limiter with the same configs that was charged the same way (its entries hold
    /// the very words the grant names), where it must give nothing.
    Refund { pick: u8, n: u8, elsewhere: bool },
    /// `class`'s limits change at runtime to `burst` per `interval` (the limiter's unit; with
    /// `fine`, a microsecond interval, which a millisecond limiter refuses).
    SetConfig {
        class: u8,
        burst: u32,
        interval: u32,
        fine: bool,
    },
}

/// A history to replay.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub cap: usize,
    /// Probe window override: `None` for the production geometry (only valid with cap < 16,
    /// where no window can fill), `Some(w)` for a window of `w` slots.
    pub window: Option<usize>,
    /// `(burst, interval)`: in milliseconds, or in microseconds if `micros`.
    pub configs: Vec<(u32, u32)>,
    pub ops: Vec<LimiterOp>,
    /// The configs' intervals are microseconds (below 1,000 each, so the limiter counts
    /// microseconds).
    pub micros: bool,
}

/// The limiter's horizon (`clock::horizon`), modeled: the highest bound it holds, in
/// nanoseconds. A reading up to it is admitted without reading the clock; a later one reads
/// the clock and raises the bound to the clock's reading plus the tolerance (its low bit
/// cleared), and is admitted only if it is at most that. After the clock went back the bound
/// stays high, so a reading ahead of the clock but within the bound is admitted.
#[derive(Debug)]
struct ModelHorizon {
    bound: u64,
}

impl ModelHorizon {
    fn new() -> Self {
        Self {
            bound: crate::clock::READING_TOLERANCE_NS,
        }
    }

    /// The bound raised from a clock reading of `clock_ns`; that reading plus the tolerance.
    fn raise(&mut self, clock_ns: u64) -> u64 {
        let latest = clock_ns.saturating_add(crate::clock::READING_TOLERANCE_NS);
        self.bound = self.bound.max(latest & !1);
        latest
    }

    /// Whether a decision at `reading` is admitted with the clock at `clock_ns`.
    fn admit(&mut self, reading: u64, clock_ns: u64) -> bool {
        reading <= self.bound || reading <= self.raise(clock_ns)
    }

    /// A change to a faster rate freezes the horizon: raised from the clock, the frozen bound
    /// (its low bit set) is the reading the change is counted at.
    fn freeze(&mut self, clock_ns: u64) -> u64 {
        self.raise(clock_ns);
        self.bound | 1
    }
}

/// The reading of an `Ahead` step: `ns` (at least 1) beyond the clock's tolerance.
fn ahead_reading(clock: &ManualClock, ns: u64) -> u64 {
    clock
        .now_ns()
        .saturating_add(crate::clock::READING_TOLERANCE_NS)
        .saturating_add(ns.max(1))
}

fn identity(id: u32) -> [u8; 4] {
    id.to_le_bytes()
}

fn answer(result: &Result<crate::limiter::Grant, LimiterRefused>) -> Answer {
    match result {
        Ok(grant) => Answer::Granted {
            overflow: grant.via_overflow(),
        },
        Err(LimiterRefused::Limited(l)) => Answer::Limited {
            overflow: l.via_overflow(),
            wait_ns: l.wait().as_nanos(),
        },
        Err(LimiterRefused::Invalid(_)) => Answer::Invalid,
    }
}

/// Runs the scenario through the real limiter and the reference, asserting identical answers,
/// identical table sizes, `len <= cap`, and that no entry is ever removed below its burst.
pub fn run(s: &Scenario) {
    let configs: Vec<BucketConfig> = s
        .configs
        .iter()
        .map(|&(b, i)| {
            if s.micros {
                let interval = std::time::Duration::from_micros(u64::from(i));
                BucketConfig::new(b, interval).unwrap()
            } else {
                BucketConfig::from_ms(b, i).unwrap()
            }
        })
        .collect();
    let mut builder = Limiter::builder().cap(s.cap);
    if let Some(window) = s.window {
        builder = builder.geometry(crate::table::geometry::MODEL_SLOTS_PER_ENTRY, window);
    }
    let clock = ManualClock::new();
    let real = builder
        .clone()
        .build_with_clock(configs.clone(), clock.clone())
        .unwrap();
    // The twin: equal configs, charged alike, never refunded by its own grants.
    let twin = builder.build_with_clock(configs, clock.clone()).unwrap();
    // How far the readings handed to the limiter lag its clock (`Back` ops).
    let mut lag = 0u64;
    // The real limiter's horizon, modeled (the twin's is not compared).
    let mut horizon = ModelHorizon::new();
    let mut reference = if s.micros {
        RefLimiter::new_micros(s.cap, &s.configs)
    } else {
        RefLimiter::new(s.cap, &s.configs)
    };
    // Every identity ever charged, so removals can be checked.
    let mut seen: Vec<(u32, u8)> = Vec::new();
    // The latest grants, for `Refund` ops to name.
    let mut grants: Vec<(crate::limiter::Grant, RefGrant)> = Vec::new();
    // The reading the reference is handed: a millisecond limiter's last instant at most.
    let counted = |now: u64| {
        u128::from(if s.micros {
            now
        } else {
            now.min(LAST_MILLIS_NS)
        })
    };
    for (step, op) in s.ops.iter().enumerate() {
        let now = clock.now_ns().saturating_sub(lag);
        let now128 = counted(now);
        // Entries holding less than a full burst before this step must still be there after it
        // (at the latest reading the step sweeps at: an `Ahead` reading the horizon admits).
        let swept_at = match *op {
            LimiterOp::Ahead { ns, .. } => ahead_reading(&clock, ns),
            _ => now,
        };
        let swept_at = counted(if swept_at <= horizon.bound {
            swept_at
        } else {
            now
        });
        let drained: Vec<((u32, u8), u128)> = seen
            .iter()
            .filter_map(|&(id, c)| {
                let tokens = reference.entry_tokens(id, c, swept_at)?;
                (tokens < u128::from(reference.burst(c))).then_some(((id, c), tokens))
            })
            .collect();
        match *op {
            LimiterOp::Charge { id, class, n } => {
                // A charge of 0 reads the bucket as one of 1 would (no free pass): it too
                // passes the horizon.
                if reference.has_class(class) && u32::from(n) <= reference.burst(class) {
                    assert!(
                        horizon.admit(now, clock.now_ns()),
                        "step {step}: behind the clock"
                    );
                }
                let result =
                    real.try_acquire_n_at(&identity(id), usize::from(class), u32::from(n), now);
                let _ = twin.try_acquire_n_at(&identity(id), usize::from(class), u32::from(n), now);
                let (want, granted) = reference.charge_granting(id, class, u32::from(n), now128);
                let got = answer(&result);
                if let (Ok(grant), Some(granted)) = (result, granted) {
                    grants.push((grant, granted));
                    if grants.len() > GRANTS_KEPT {
                        grants.remove(0);
                    }
                }
                assert_eq!(got, want, "step {step}: {op:?} at {now}");
                if !seen.contains(&(id, class)) && usize::from(class) < s.configs.len() {
                    seen.push((id, class));
                }
            }
            LimiterOp::Peek { id, class, n } => {
                if reference.has_class(class) && u32::from(n) <= reference.burst(class) {
                    assert!(
                        horizon.admit(now, clock.now_ns()),
                        "step {step}: behind the clock"
                    );
                }
                let got = real
                    .peek_at(&identity(id), usize::from(class), u32::from(n), now)
                    .ok()
                    .map(|p| {
                        (
                            u128::from(p.available()),
                            p.wait().as_nanos(),
                            p.via_overflow(),
                        )
                    });
                let want = reference.peek(id, class, u32::from(n), now128);
                assert_eq!(got, want, "step {step}: {op:?} at {now}");
            }
            LimiterOp::Advance { ns } => {
                // The clock stops short of the last tick (104 years), where the reference,
                // unbounded, would part from the clamped arithmetic.
                if clock.now_ns().saturating_add(ns) < LAST_READING_NS {
                    clock.advance_ns(ns);
                }
                lag = 0;
            }
            LimiterOp::Sweep => {
                assert!(
                    horizon.admit(now, clock.now_ns()),
                    "step {step}: behind the clock"
                );
                reference.enter(now128);
                assert_eq!(
                    real.reclaim_full_at(now),
                    Ok(reference.reclaim_full(now128)),
                    "step {step}: sweep freed a different number of entries"
                );
            }
            LimiterOp::Back { ns } => {
                lag = lag.saturating_add(ns);
            }
            LimiterOp::ClockBack { ns } => {
                clock.set_ns(clock.now_ns().saturating_sub(ns));
            }
            LimiterOp::Refund { pick, n, elsewhere } => {
                if grants.is_empty() {
                    continue;
                }
                // A refund consumes its grant: a grant is given back at most once.
                let (grant, granted) = grants.remove(usize::from(pick) % grants.len());
                if elsewhere {
                    // On the twin it gives nothing, and the twin's bucket is as it was.
                    let (id, class) = (identity(granted.id), grant.class());
                    let before = twin.peek_at(&id, class, 0, now);
                    let given = twin.refund_at(grant, u32::from(n), now);
                    assert!(
                        matches!(given, Ok(Refunded::OtherInstance | Refunded::Nothing)),
                        "step {step}: a grant refunded on another limiter: {given:?}"
                    );
                    assert_eq!(twin.peek_at(&id, class, 0, now), before, "step {step}");
                    continue;
                }
                if reference.changed_since(&granted) {
                    // After a change of its class a refund is void, or exact when the class
                    // word, the entry's era bit and its state are all back to what the take
                    // left (two changes to one config, the entry rewritten in that era): both
                    // sound, and which one depends on era bits the model does not keep. Not
                    // driven here; `limiter::tests` and the loom models check refunds that a
                    // change voids.
                    continue;
                }
                let n = u32::from(n);
                let asked = n.min(grant.tokens());
                if asked > 0 {
                    assert!(
                        horizon.admit(now, clock.now_ns()),
                        "step {step}: behind the clock"
                    );
                }
                let got = real.refund_at(grant, n, now);
                // Each grant is refunded once, and gives back at most what it took.
                let given = reference.refund(&granted, n, now128);
                let want = match (asked, given) {
                    (0, _) => Refunded::Nothing,
                    (_, 0) => Refunded::Void,
                    (_, tokens) => Refunded::Exact { tokens },
                };
                assert_eq!(got, Ok(want), "step {step}: {op:?} at {now}");
            }
            LimiterOp::SetConfig {
                class,
                burst,
                interval,
                fine,
            } => {
                let fine = fine && !s.micros;
                let config = if s.micros || fine {
                    let interval = std::time::Duration::from_micros(u64::from(interval));
                    BucketConfig::new(burst, interval)
                } else {
                    BucketConfig::from_ms(burst, interval)
                };
                let Ok(config) = config else { continue };
                let check = real.check_config(usize::from(class), &config);
                let got = real.set_config(usize::from(class), config);
                assert_eq!(
                    got, check,
                    "step {step}: check_config disagrees with set_config"
                );
                let fits = !fine || interval % 1_000 == 0;
                match got {
                    Ok(()) => {
                        assert!(fits && usize::from(class) < s.configs.len(), "step {step}");
                        assert_eq!(real.config(usize::from(class)), Some(config));
                        // Where the real change is counted: a faster rate at the frozen
                        // horizon, a slower one (or the same) at the clock's reading.
                        let clock_ns = clock.now_ns();
                        let at = if reference.is_faster(class, interval) {
                            horizon.freeze(clock_ns)
                        } else {
                            clock_ns
                        };
                        reference.set_config(
                            class,
                            burst,
                            interval,
                            counted(clock_ns),
                            counted(at),
                        );
                    }
                    Err(crate::LimiterConfigError::UnknownClass { classes, .. }) => {
                        assert!(usize::from(class) >= s.configs.len(), "step {step}");
                        assert_eq!(classes, s.configs.len());
                    }
                    Err(crate::LimiterConfigError::ClassDoesNotFit { .. }) => {
                        assert!(!fits, "step {step}: {op:?} refused");
                    }
                    Err(crate::LimiterConfigError::DebtBeyondUnit { .. }) => {
                        assert!(
                            reference.longest_after(class, burst, interval).is_none(),
                            "step {step}: {op:?} refused"
                        );
                    }
                    Err(e) => panic!("step {step}: {e}"),
                }
            }
            LimiterOp::Ahead { id, ns } => {
                let reading = ahead_reading(&clock, ns);
                let result = real.try_acquire_at(&identity(id), 0, reading);
                if horizon.admit(reading, clock.now_ns()) {
                    // The clock went back below a horizon it had raised: a reading up to the
                    // horizon is admitted, and decided as any other.
                    let (want, granted) = reference.charge_granting(id, 0, 1, counted(reading));
                    let got = answer(&result);
                    if let (Ok(grant), Some(granted)) = (result, granted) {
                        grants.push((grant, granted));
                        if grants.len() > GRANTS_KEPT {
                            grants.remove(0);
                        }
                    }
                    assert_eq!(got, want, "step {step}: {op:?} at {reading}");
                    if !seen.contains(&(id, 0)) {
                        seen.push((id, 0));
                    }
                } else {
                    assert!(
                        matches!(
                            result,
                            Err(LimiterRefused::Invalid(InvalidCharge::ReadingAhead(_)))
                        ),
                        "step {step}: a reading ahead of the horizon was not refused"
                    );
                }
                let swept = real.reclaim_full_at(reading).ok();
                if horizon.admit(reading, clock.now_ns()) {
                    reference.enter(counted(reading));
                    assert_eq!(
                        swept,
                        Some(reference.reclaim_full(counted(reading))),
                        "step {step}: sweep at {reading} freed a different number of entries"
                    );
                } else {
                    assert_eq!(swept, None, "step {step}: a sweep ahead of the horizon ran");
                }
            }
        }
        assert_eq!(
            real.len(),
            reference.len(),
            "step {step}: table sizes differ"
        );
        assert!(real.len() <= real.cap(), "step {step}: len above cap");
        assert_eq!(
            real.horizon_bound(),
            horizon.bound,
            "step {step}: the modeled horizon parted from the limiter's"
        );
        for ((id, c), tokens) in drained {
            let still = real.entry_tokens_at(&identity(id), usize::from(c), now);
            assert!(
                still.is_some(),
                "step {step}: entry {id}/{c} holding {tokens} tokens was removed below its burst"
            );
        }
        for class in 0..s.configs.len() {
            assert_eq!(
                real.overflow_charges(class),
                Some(reference.overflow_charges[class]),
                "step {step}: overflow charges of class {class} differ"
            );
        }
    }
}

/// How many of the latest grants a run keeps for `Refund` ops to name.
const GRANTS_KEPT: usize = 8;

/// Decodes fuzzer bytes into a scenario: a small cap, two or three classes, and up to 400 ops
/// over identities drawn from a small space (reuse) or a large one (churn).
pub fn decode(data: &[u8]) -> Scenario {
    let mut r = ByteReader::new(data);
    let shape = r.u8();
    // Bit 1: microsecond classes (intervals below 1 ms) and jumps across epochs.
    let micros = shape & 2 != 0;
    let (cap, window) = if shape & 1 == 0 {
        (usize::from(r.u8() % 15) + 1, None)
    } else {
        (usize::from(r.u8() % 48) + 1, Some(usize::MAX))
    };
    let classes = 2 + usize::from(r.u8() % 2);
    let configs = (0..classes)
        .map(|_| {
            if micros {
                (u32::from(r.u16() % 2_000) + 1, u32::from(r.u16() % 999) + 1)
            } else {
                (u32::from(r.u8() % 6) + 1, u32::from(r.u16() % 1_000) + 1)
            }
        })
        .collect();
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 400 {
        let op = match r.u8() % 10 {
            0..=2 => LimiterOp::Charge {
                id: u32::from(r.u8() % 8),
                class: r.u8() % 4,
                n: r.u8() % 8,
            },
            3 => LimiterOp::Charge {
                id: r.u32(),
                class: r.u8() % 4,
                n: r.u8() % 4,
            },
            4 => LimiterOp::Peek {
                id: u32::from(r.u8() % 8),
                class: r.u8() % 4,
                n: r.u8() % 8,
            },
            5 => LimiterOp::Advance {
                ns: u64::from(r.u16()) * MS / 8,
            },
            6 if micros => LimiterOp::Advance {
                ns: far_jump(r.u8()),
            },
            6 => LimiterOp::Advance {
                ns: far_jump_millis(r.u8()),
            },
            7 => LimiterOp::Sweep,
            8 => LimiterOp::Back {
                ns: u64::from(r.u16()) * MS / 64,
            },
            9 if r.u8().is_multiple_of(2) => {
                let pick = r.u8();
                LimiterOp::Refund {
                    pick,
                    n: r.u8() % 8,
                    // One refund in eight on the twin (the pick's top bits; the bytes read
                    // are as before).
                    elsewhere: pick >= 224,
                }
            }
            9 if r.u8().is_multiple_of(3) => LimiterOp::SetConfig {
                class: r.u8() % 4,
                burst: u32::from(r.u8() % 8) + 1,
                interval: u32::from(r.u16() % 999) + 1,
                fine: r.u8().is_multiple_of(4),
            },
            _ => {
                let id = u32::from(r.u8() % 8);
                let ns = u64::from(r.u32());
                let shift = r.u8();
                // One in eight moves the clock back instead (the shift's top bits; the bytes
                // read are as before): by up to 4 s, or, shifted, as far as 0.
                if shift >= 224 {
                    LimiterOp::ClockBack {
                        ns: ns << (shift % 32),
                    }
                } else {
                    LimiterOp::Ahead {
                        id,
                        ns: ns << (shift % 32),
                    }
                }
            }
        };
        ops.push(op);
    }
    Scenario {
        cap,
        window,
        configs,
        ops,
        micros,
    }
}

/// A jump of the clock that crosses the microsecond limiter's epochs (or not): a few
/// nanoseconds, a second, a day, an epoch exactly, one tick more or less, 19 days, 100 years.
pub fn far_jump(pick: u8) -> u64 {
    let epoch_ns = crate::limiter::EPOCH_TICKS * 1_000;
    match pick % 9 {
        0 => u64::from(pick),
        1 => 1_000_000_000,
        2 => 86_400_000_000_000,
        3 => epoch_ns,
        4 => epoch_ns + 1_000,
        5 => epoch_ns - 1_000,
        6 => 3 * epoch_ns,
        7 => 100 * 365 * 86_400_000_000_000,
        _ => 1_000,
    }
}

/// A jump of a millisecond limiter's clock towards its last instant ([`LAST_MILLIS_NS`],
/// about 34.8 years) and past it: a few nanoseconds (most picks), a second, a day, 2^59 ns
/// (18.3 years), and the last instant itself less a day, less a second, or not at all (from
/// a clock at 0, a jump to a day short of it and then a day lands on it exactly).
pub fn far_jump_millis(pick: u8) -> u64 {
    match pick {
        0..=249 => u64::from(pick),
        250 => 1_000 * MS,
        251 => 86_400_000 * MS,
        252 => 1 << 59,
        253 => LAST_MILLIS_NS - 86_400_000 * MS,
        254 => LAST_MILLIS_NS - 1_000 * MS,
        _ => LAST_MILLIS_NS,
    }
}

/// The `limiter_miss_path` fuzz target's body.
pub fn fuzz_limiter_miss_path(data: &[u8]) {
    run(&decode(data));
}
