//! The keyed limiter against a sequential reference: a `HashMap` of reference buckets with the
//! seed's cap rules written out literally, plus one reference overflow bucket per class.

use super::bucket::{RefBucket, RefTake};
use super::bytes::ByteReader;
use crate::bucket::BucketConfig;
use crate::clock::{Clock, ManualClock};
use crate::limiter::{InvalidCharge, Limiter, LimiterRefused};
use std::collections::HashMap;

const MS: u64 = 1_000_000;
const MS_128: u128 = 1_000_000;
/// Readings stop a day short of the clamp at `MAX_NOW_TICK` milliseconds (a millisecond
/// limiter clamps earlier, at `MAX_MILLIS_NOW_TICK`, and so does the reference).
const LAST_READING_NS: u64 = (crate::clock::tick::MAX_NOW_TICK - 86_400_000) * MS;

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
    /// A charge of `id` at a reading `ns` beyond the clock's tolerance: refused, changes
    /// nothing.
    Ahead { id: u32, ns: u64 },
    /// Give back up to `n` tokens of one of the latest grants (`pick` modulo how many are
    /// kept), at the reading of the step (behind the clock after `Back`).
    Refund { pick: u8, n: u8 },
    /// `class`'s limits change at runtime to `burst` per `interval` (the limiter's unit; with
    /// `fine`, a microsecond interval, which a millisecond limiter refuses).
    SetConfig {
        class: u8,
        burst: u32,
        interval: u32,
        fine: bool,
    },
}

/// A grant of the reference limiter: whose, which bucket paid, and what the take left.
#[derive(Debug, Clone, Copy)]
pub struct RefGrant {
    id: u32,
    class: u8,
    overflow: bool,
    grant: super::bucket::RefGrant,
}

/// What a charge answered, in the reference's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Granted { overflow: bool },
    Limited { overflow: bool, wait_ns: u128 },
    Invalid,
}

/// The reference limiter.
pub struct RefLimiter {
    cap: usize,
    configs: Vec<(u32, u32)>,
    entries: HashMap<(u32, u8), RefBucket>,
    overflow: Vec<RefBucket>,
    pub overflow_charges: Vec<u64>,
    /// The latest tick at which a reclaim removed an entry: fresh entries are full from it on,
    /// not from the beginning of time.
    floor: u128,
    /// Nanoseconds per tick: a millisecond, or a microsecond for a limiter with a fine class.
    tick_ns: u128,
    /// In microseconds, the current epoch's base (`limiter::epoch`): a decision whose reading
    /// is more than an epoch past it moves it to its reading and raises every entry's
    /// `full_at` to it; every entry a charge lands on is raised to it.
    epoch_base: Option<u128>,
}

impl RefLimiter {
    pub fn new(cap: usize, configs: &[(u32, u32)]) -> Self {
        Self {
            cap,
            configs: configs.to_vec(),
            entries: HashMap::new(),
            overflow: configs.iter().map(|&(b, i)| RefBucket::new(b, i)).collect(),
            overflow_charges: vec![0; configs.len()],
            floor: 0,
            tick_ns: MS_128,
            epoch_base: None,
        }
    }

    /// A limiter whose configs count microseconds: `(burst, interval in µs)`.
    pub fn new_micros(cap: usize, configs: &[(u32, u32)]) -> Self {
        let mut this = Self::new(cap, configs);
        this.tick_ns = 1_000;
        this.epoch_base = Some(0);
        for bucket in &mut this.overflow {
            *bucket = bucket.clone().in_ticks_of(1_000);
        }
        this
    }

    fn tick(&self, now: u128) -> u128 {
        let max_now = if self.tick_ns == MS_128 {
            u128::from(crate::limiter::MAX_MILLIS_NOW_TICK)
        } else {
            u128::from(crate::clock::tick::MAX_NOW_TICK) * (MS_128 / self.tick_ns)
        };
        (now / self.tick_ns).min(max_now)
    }

    /// In microseconds: moves to a new epoch if `now` is more than one past the base.
    fn enter(&mut self, now: u128) {
        let tick = self.tick(now);
        if let Some(base) = self.epoch_base {
            if tick.saturating_sub(base) > u128::from(crate::limiter::EPOCH_TICKS) {
                self.epoch_base = Some(tick);
                for bucket in self.entries.values_mut() {
                    bucket.raise_to(tick);
                }
            }
        }
    }

    fn fresh(&self, burst: u32, interval: u32) -> RefBucket {
        RefBucket::full_from(burst, interval, self.floor).in_ticks_of(self.tick_ns)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// An entry as a decision reads it: in milliseconds a state of 0 is a newborn's code
    /// (a refund at tick 0 of a take at tick 0 writes it), read as full from the floor on.
    fn dated(&self, bucket: &RefBucket) -> RefBucket {
        let mut bucket = bucket.clone();
        if self.epoch_base.is_none() && bucket.holds_zero() {
            bucket.raise_to(self.floor);
        }
        bucket
    }

    fn is_full(&self, bucket: &RefBucket, class: u8, now: u128) -> bool {
        bucket.available(now) == u128::from(self.configs[usize::from(class)].0)
    }

    /// Removes every entry holding its full burst; returns how many.
    pub fn reclaim_full(&mut self, now: u128) -> usize {
        let before = self.entries.len();
        let full: Vec<(u32, u8)> = self
            .entries
            .iter()
            // In milliseconds a state of 0 is a newborn's code (a refund at tick 0 of a take
            // at tick 0 writes it), which a sweep keeps.
            .filter(|(&(_, class), b)| {
                self.is_full(b, class, now) && (self.epoch_base.is_some() || !b.holds_zero())
            })
            .map(|(&k, _)| k)
            .collect();
        if !full.is_empty() {
            self.floor = self.floor.max(self.tick(now));
        }
        for k in full {
            self.entries.remove(&k);
        }
        before - self.entries.len()
    }

    /// The bucket a charge of `(id, class)` lands on, applying the cap rules: `None` means
    /// the class's overflow bucket.
    fn landing(&mut self, id: u32, class: u8, now: u128) -> Option<(u32, u8)> {
        let key = (id, class);
        if self.entries.contains_key(&key) {
            return Some(key);
        }
        if self.entries.len() >= self.cap {
            self.reclaim_full(now);
        }
        if self.entries.len() < self.cap {
            let (b, i) = self.configs[usize::from(class)];
            self.entries.insert(key, self.fresh(b, i));
            return Some(key);
        }
        None
    }

    pub fn charge(&mut self, id: u32, class: u8, n: u32, now: u128) -> Answer {
        self.charge_granting(id, class, n, now).0
    }

    /// [`RefLimiter::charge`], and the grant a refund names (`None` if it took nothing).
    pub fn charge_granting(
        &mut self,
        id: u32,
        class: u8,
        n: u32,
        now: u128,
    ) -> (Answer, Option<RefGrant>) {
        let Some(&(burst, _)) = self.configs.get(usize::from(class)) else {
            return (Answer::Invalid, None);
        };
        if n > burst {
            return (Answer::Invalid, None);
        }
        if n == 0 {
            return (Answer::Granted { overflow: false }, None);
        }
        self.enter(now);
        let base = self.epoch_base;
        let landing = self.landing(id, class, now);
        let overflow = landing.is_none();
        let floor = self.floor;
        let bucket = match landing {
            Some(key) => {
                let bucket = self.entries.get_mut(&key).unwrap();
                if base.is_none() && bucket.holds_zero() {
                    // A newborn's code: dated from the floor, and written so if refused too.
                    bucket.raise_to(floor);
                }
                bucket
            }
            None => {
                self.overflow_charges[usize::from(class)] += 1;
                &mut self.overflow[usize::from(class)]
            }
        };
        let (taken, granted) = bucket.take_granting(n, now);
        if let (Some(base), false) = (base, overflow) {
            bucket.raise_to(base);
        }
        let granted = granted.map(|grant| RefGrant {
            id,
            class,
            overflow,
            grant,
        });
        match taken {
            RefTake::Granted => (Answer::Granted { overflow }, granted),
            RefTake::Empty { wait_ns } => (Answer::Limited { overflow, wait_ns }, None),
            RefTake::ExceedsBurst => (Answer::Invalid, None),
        }
    }

    /// Gives back up to `n` tokens of `grant` at reading `now`: exactly if the bucket it was
    /// paid from is as the grant left it (no take, refund or change since, and not reclaimed),
    /// void otherwise, as the real limiter does. An entry refunded is raised to the epoch base
    /// as any value written in microseconds is.
    pub fn refund(&mut self, grant: &RefGrant, n: u32, now: u128) {
        if n == 0 {
            // Nothing to give back: the real limiter returns before it reads the epoch.
            return;
        }
        if grant.overflow {
            self.overflow[usize::from(grant.class)].refund(&grant.grant, n);
            return;
        }
        self.enter(now);
        let base = self.epoch_base;
        if let Some(bucket) = self.entries.get_mut(&(grant.id, grant.class)) {
            if bucket.refund(&grant.grant, n) > 0 {
                // Raised to the epoch base as any microsecond value is.
                if let Some(base) = base {
                    bucket.raise_to(base);
                }
            }
        }
    }

    /// (available, wait for n, overflow) as a charge would see it; reclaims at the cap first,
    /// like the real peek.
    pub fn peek(&mut self, id: u32, class: u8, n: u32, now: u128) -> Option<(u128, u128, bool)> {
        let &(burst, interval) = self.configs.get(usize::from(class))?;
        if n > burst {
            return None;
        }
        self.enter(now);
        let key = (id, class);
        let (bucket, overflow) = if let Some(b) = self.entries.get(&key) {
            (self.dated(b), false)
        } else if self.entries.len() < self.cap || self.reclaim_full(now) > 0 {
            (self.fresh(burst, interval), false)
        } else {
            (self.overflow[usize::from(class)].clone(), true)
        };
        let wait = bucket.ready_ns(n).map_or(0, |r| r.saturating_sub(now));
        Some((bucket.available(now), wait, overflow))
    }

    /// `class`'s limits change at reading `now`: every bucket of the class (its entries and
    /// its overflow bucket) is converted at once, as a `TokenBucket` is (see
    /// `RefBucket::set_limits`), and the tokens it owes carry over: a full bucket stays full,
    /// and one that owed tokens still owes them all, whatever the new burst. A faster rate is
    /// counted from the latest reading a decision may have been admitted at, `now` plus the
    /// reading tolerance.
    pub fn set_config(&mut self, class: u8, burst: u32, interval: u32, now: u128) {
        self.enter(now);
        let faster = interval < self.configs[usize::from(class)].1;
        let tolerance = u128::from(crate::clock::READING_TOLERANCE_NS);
        let at = self.tick(if faster { now + tolerance } else { now }) * self.tick_ns;
        self.configs[usize::from(class)] = (burst, interval);
        let converted = std::iter::once(&mut self.overflow[usize::from(class)]).chain(
            self.entries
                .iter_mut()
                .filter(|((_, c), _)| *c == class)
                .map(|(_, b)| b),
        );
        for bucket in converted {
            let owed = bucket.owed(at);
            let (_, cut) = bucket.set_limits(burst, interval, at);
            let after = bucket.owed(at);
            assert_eq!(
                owed == 0,
                after == 0,
                "a change made a bucket full, or drained it"
            );
            assert!(
                cut || after >= owed,
                "a change forgave tokens owed: {owed} before, {after} after"
            );
        }
    }

    /// The burst `class` has now.
    pub fn burst(&self, class: u8) -> u32 {
        self.configs[usize::from(class)].0
    }

    /// Tokens in `(id, class)`'s own entry, if it has one.
    pub fn entry_tokens(&self, id: u32, class: u8, now: u128) -> Option<u128> {
        self.entries
            .get(&(id, class))
            .map(|b| self.dated(b).available(now))
    }
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

fn identity(id: u32) -> [u8; 4] {
    id.to_le_bytes()
}

fn answer(result: Result<crate::limiter::Grant, LimiterRefused>) -> Answer {
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
    let real = builder.build_with_clock(configs, clock.clone()).unwrap();
    // How far the readings handed to the limiter lag its clock (`Back` ops).
    let mut lag = 0u64;
    let mut reference = if s.micros {
        RefLimiter::new_micros(s.cap, &s.configs)
    } else {
        RefLimiter::new(s.cap, &s.configs)
    };
    // Every identity ever charged, so removals can be checked.
    let mut seen: Vec<(u32, u8)> = Vec::new();
    // The latest grants, for `Refund` ops to name.
    let mut grants: Vec<(crate::limiter::Grant, RefGrant)> = Vec::new();
    for (step, op) in s.ops.iter().enumerate() {
        let now = clock.now_ns().saturating_sub(lag);
        let now128 = u128::from(now);
        // Entries holding less than a full burst before this step must still be there after it.
        let drained: Vec<((u32, u8), u128)> = seen
            .iter()
            .filter_map(|&(id, c)| {
                let tokens = reference.entry_tokens(id, c, now128)?;
                (tokens < u128::from(reference.burst(c))).then_some(((id, c), tokens))
            })
            .collect();
        match *op {
            LimiterOp::Charge { id, class, n } => {
                let result =
                    real.try_acquire_n_at(&identity(id), usize::from(class), u32::from(n), now);
                let (want, granted) = reference.charge_granting(id, class, u32::from(n), now128);
                if let (Ok(grant), Some(granted)) = (&result, granted) {
                    grants.push((*grant, granted));
                    if grants.len() > GRANTS_KEPT {
                        grants.remove(0);
                    }
                }
                let got = answer(result);
                assert_eq!(got, want, "step {step}: {op:?} at {now}");
                if !seen.contains(&(id, class)) && usize::from(class) < s.configs.len() {
                    seen.push((id, class));
                }
            }
            LimiterOp::Peek { id, class, n } => {
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
            LimiterOp::Refund { pick, n } => {
                if grants.is_empty() {
                    continue;
                }
                let (grant, granted) = grants[usize::from(pick) % grants.len()];
                let n = u32::from(n);
                let id = identity(granted.id);
                assert_eq!(real.refund_at(&id, &grant, n, now), Ok(()), "step {step}");
                reference.refund(&granted, n, now128);
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
                let got = real.set_config(usize::from(class), config);
                let check = real.check_config(usize::from(class), &config);
                assert_eq!(
                    got, check,
                    "step {step}: check_config disagrees with set_config"
                );
                let fits = !fine || interval % 1_000 == 0;
                match got {
                    Ok(()) => {
                        assert!(fits && usize::from(class) < s.configs.len(), "step {step}");
                        assert_eq!(real.config(usize::from(class)), Some(config));
                        reference.set_config(class, burst, interval, u128::from(clock.now_ns()));
                    }
                    Err(crate::LimiterConfigError::UnknownClass { classes, .. }) => {
                        assert!(usize::from(class) >= s.configs.len(), "step {step}");
                        assert_eq!(classes, s.configs.len());
                    }
                    Err(crate::LimiterConfigError::ClassDoesNotFit { .. }) => {
                        assert!(!fits, "step {step}: {op:?} refused");
                    }
                    Err(e) => panic!("step {step}: {e}"),
                }
            }
            LimiterOp::Ahead { id, ns } => {
                let reading = clock
                    .now_ns()
                    .saturating_add(crate::clock::READING_TOLERANCE_NS)
                    .saturating_add(ns.max(1));
                assert!(
                    matches!(
                        real.try_acquire_at(&identity(id), 0, reading),
                        Err(LimiterRefused::Invalid(InvalidCharge::ReadingAhead(_)))
                    ),
                    "step {step}: a reading ahead of the clock was not refused"
                );
                assert_eq!(
                    real.reclaim_full_at(reading).ok(),
                    None,
                    "step {step}: a sweep ahead of the clock ran"
                );
            }
        }
        assert_eq!(
            real.len(),
            reference.len(),
            "step {step}: table sizes differ"
        );
        assert!(real.len() <= real.cap(), "step {step}: len above cap");
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
                ns: u64::from(r.u8()),
            },
            7 => LimiterOp::Sweep,
            8 => LimiterOp::Back {
                ns: u64::from(r.u16()) * MS / 64,
            },
            9 if r.u8().is_multiple_of(2) => LimiterOp::Refund {
                pick: r.u8(),
                n: r.u8() % 8,
            },
            9 if r.u8().is_multiple_of(3) => LimiterOp::SetConfig {
                class: r.u8() % 4,
                burst: u32::from(r.u8() % 8) + 1,
                interval: u32::from(r.u16() % 999) + 1,
                fine: r.u8().is_multiple_of(4),
            },
            _ => LimiterOp::Ahead {
                id: u32::from(r.u8() % 8),
                ns: u64::from(r.u32()) << (r.u8() % 32),
            },
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

/// The `limiter_miss_path` fuzz target's body.
pub fn fuzz_limiter_miss_path(data: &[u8]) {
    run(&decode(data));
}
