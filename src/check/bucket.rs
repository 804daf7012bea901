//! The token bucket against a sequential reference model in `u128` arithmetic.
//!
//! The reference states the rules in terms of debt, the time still owed before the bucket is
//! full, with none of the implementation's packing, clamping or saturation. It mirrors
//! [`TokenBucket`]: its takes, peeks, changes of limits (counted at the change's reading, or
//! for a faster rate at the latest reading a take or a change used if that is later; a
//! `LateSetConfig` is a change whose reading lags the takes and changes that landed before
//! it), and refunds (an
//! exact undo of the grant named, if nothing landed since; void otherwise). The driver runs an
//! op sequence through both and asserts identical answers, identical waits, and the
//! spec-level invariants that do not depend on either formulation: among them the envelope,
//! that the tokens granted (net of the refunds that gave back) at readings within any span `L`
//! never exceed the largest burst in force plus `L` over the shortest interval in force,
//! across every change, at any reading order.

use super::bytes::ByteReader;
use crate::bucket::{BucketConfig, BucketGrant, BucketRefused, Refunded, TokenBucket};
use std::time::Duration;

const NS_PER_MS: u128 = 1_000_000;

/// One step of a bucket history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketOp {
    /// The reading moves forward.
    Advance { ns: u64 },
    /// The reading moves back (a clock step, or a racing thread's older reading).
    StepBack { ns: u64 },
    /// Take `n` tokens.
    Take { n: u32 },
    /// Peek: available tokens, wait for `n`, fullness.
    Peek { n: u32 },
    /// Give back `n` tokens of one of the latest grants (`pick` modulo how many are kept);
    /// with `elsewhere`, into a twin bucket of the same config that took and changed alike
    /// (its state word is the very word the grant names), where it must give nothing.
    Refund { pick: u8, n: u32, elsewhere: bool },
    /// Change the limits at runtime to `burst` per `interval_us` microseconds (refused by a
    /// millisecond bucket if not whole milliseconds, or by a microsecond one if too long).
    SetConfig { burst: u32, interval_us: u32 },
    /// [`BucketOp::SetConfig`] at a reading `behind_ns` before the current one, which stays:
    /// a change that read its clock before takes (or another change) landed ahead of it.
    LateSetConfig {
        burst: u32,
        interval_us: u32,
        behind_ns: u64,
    },
}

/// The reference: `full_at` in ticks (milliseconds, or microseconds for a fine config) as an
/// unbounded integer, derived from debt.
#[derive(Debug, Clone)]
pub struct RefBucket {
    burst: u128,
    interval: u128,
    /// Ticks at which the bucket is full again; 0 when never charged.
    full_at: u128,
    /// Nanoseconds per tick.
    tick_ns: u128,
    /// The latest tick a take was asked at or a change was made at (a faster change is
    /// counted no earlier).
    latest: u128,
    /// How many changes were made: a refund after one is void.
    changes: u64,
    /// The longest debt the configs so far allow, in ticks (`bucket::debt`).
    longest: u128,
}

/// The longest debt after a change from interval `old` to `burst` per `interval`, given
/// `longest` before it (`bucket::debt`), or `None` if carried it would exceed the unit's
/// longest span (2^40 ms, 2^38 µs): the change is refused.
pub fn longest_after(
    longest: u128,
    old: u128,
    burst: u32,
    interval: u32,
    tick_ns: u128,
) -> Option<u128> {
    let interval = u128::from(interval);
    let carried = if interval == old {
        longest
    } else {
        (longest * interval).div_ceil(old)
    };
    let span = if tick_ns == NS_PER_MS {
        1 << 40
    } else {
        1 << 38
    };
    (carried <= span).then(|| carried.max(u128::from(burst) * interval))
}

/// What a grant of the reference left: the bucket's state after it, under which change, and
/// the tokens it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefGrant {
    full_at: u128,
    changes: u64,
    n: u32,
}

/// What a take answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefTake {
    Granted,
    Empty { wait_ns: u128 },
    ExceedsBurst,
}

impl RefBucket {
    pub fn new(burst: u32, interval_ms: u32) -> Self {
        Self {
            burst: u128::from(burst),
            interval: u128::from(interval_ms),
            full_at: 0,
            tick_ns: NS_PER_MS,
            latest: 0,
            changes: 0,
            longest: u128::from(burst) * u128::from(interval_ms),
        }
    }

    /// The same bucket counting ticks of `tick_ns` nanoseconds (its interval and `full_at`
    /// are then in those ticks).
    pub fn in_ticks_of(self, tick_ns: u128) -> Self {
        Self { tick_ns, ..self }
    }

    /// The limits changed at runtime at reading `now_ns`: the rule of "Limits changed at
    /// runtime" in the bucket docs, written as debt. A faster rate is counted at the latest
    /// tick a take or a change used if that is later than the change's. There, the time still
    /// owed `x` is `x / T` tokens; under the new interval `T′` they are `x · T′ / T` of time,
    /// rounded up to a tick, whatever the new burst. A change whose longest carried debt
    /// (`bucket::debt`) would exceed the unit's longest span is refused: `None`, changing
    /// nothing. Otherwise the tick it was counted at, and the later tick it was counted at for
    /// this bucket's own debt if that was longer than the longest (see `convert_at`).
    pub fn set_limits(&mut self, burst: u32, interval: u32, now_ns: u128) -> Option<(u128, u128)> {
        let after = longest_after(self.longest, self.interval, burst, interval, self.tick_ns)?;
        let reading = now_ns / self.tick_ns;
        let at = if u128::from(interval) < self.interval {
            reading.max(self.latest)
        } else {
            reading
        };
        // A change's reading counts as a take's: a later faster change is counted no earlier.
        self.latest = self.latest.max(reading);
        let counted = self.convert_at(burst, interval, at, self.longest);
        self.longest = after;
        Some((at, counted))
    }

    /// The change to `burst` per `interval` counted at tick `at`, for a bucket whose debt at
    /// any take's reading is at most `longest` ticks: a longer debt at `at` is counted from the
    /// tick at which it was `longest` (`gcra::convert_within`). Returns that tick.
    pub fn convert_at(&mut self, burst: u32, interval: u32, at: u128, longest: u128) -> u128 {
        let (burst, interval) = (u128::from(burst), u128::from(interval));
        let counted = at.max(self.full_at.saturating_sub(longest));
        let debt = self.full_at.saturating_sub(counted);
        if debt > 0 && interval != self.interval {
            self.full_at = counted + (debt * interval).div_ceil(self.interval);
        }
        self.burst = burst;
        self.interval = interval;
        self.changes += 1;
        counted
    }

    /// The tick at which the bucket is full again.
    pub fn full_at_tick(&self) -> u128 {
        self.full_at
    }

    /// Whole tokens owed at reading `now_ns` (more than the burst if a lowered burst left it
    /// so).
    pub fn owed(&self, now_ns: u128) -> u128 {
        self.debt(now_ns).div_ceil(self.interval)
    }

    /// The burst.
    pub fn burst(&self) -> u128 {
        self.burst
    }

    /// Whether the state is 0: never charged, or undone to tick 0.
    pub fn holds_zero(&self) -> bool {
        self.full_at == 0
    }

    /// Raises `full_at` to `tick` if earlier (a later `full_at` never holds more tokens).
    pub fn raise_to(&mut self, tick: u128) {
        self.full_at = self.full_at.max(tick);
    }

    /// A bucket that is full from `full_at` on (and owes the difference before it).
    pub fn full_from(burst: u32, interval_ms: u32, full_at: u128) -> Self {
        Self {
            full_at,
            ..Self::new(burst, interval_ms)
        }
    }

    fn debt(&self, now_ns: u128) -> u128 {
        self.full_at.saturating_sub(now_ns / self.tick_ns)
    }

    pub fn available(&self, now_ns: u128) -> u128 {
        let owed_tokens = self.debt(now_ns).div_ceil(self.interval);
        self.burst.saturating_sub(owed_tokens)
    }

    /// The first reading (ns) at which `n` tokens can be taken, or `None` if `n > burst`.
    pub fn ready_ns(&self, n: u32) -> Option<u128> {
        let n = u128::from(n);
        if n > self.burst {
            return None;
        }
        if n == 0 {
            return Some(0);
        }
        // Allowed once debt + n·T <= burst·T, i.e. once now_tick >= full_at + n·T − burst·T.
        let ready = (self.full_at + n * self.interval).saturating_sub(self.burst * self.interval);
        Some(ready * self.tick_ns)
    }

    pub fn take(&mut self, n: u32, now_ns: u128) -> RefTake {
        self.take_granting(n, now_ns).0
    }

    /// [`RefBucket::take`], and the grant a refund names.
    pub fn take_granting(&mut self, n: u32, now_ns: u128) -> (RefTake, Option<RefGrant>) {
        // Every take's reading counts, granted or not.
        self.latest = self.latest.max(now_ns / self.tick_ns);
        let Some(ready) = self.ready_ns(n) else {
            return (RefTake::ExceedsBurst, None);
        };
        if ready > now_ns {
            let wait_ns = ready - now_ns;
            return (RefTake::Empty { wait_ns }, None);
        }
        if n == 0 {
            return (RefTake::Granted, None);
        }
        let now_tick = now_ns / self.tick_ns;
        self.full_at = now_tick + self.debt(now_ns) + u128::from(n) * self.interval;
        let grant = RefGrant {
            full_at: self.full_at,
            changes: self.changes,
            n,
        };
        (RefTake::Granted, Some(grant))
    }

    /// Gives back up to `n` of the tokens `grant` took: exactly undone if the bucket is as that
    /// take left it (no take, refund or change since), void otherwise. Returns the tokens
    /// given back.
    pub fn refund(&mut self, grant: &RefGrant, n: u32) -> u32 {
        if self.changes != grant.changes {
            return 0;
        }
        self.undo(grant, n)
    }

    /// [`RefBucket::refund`] judged on the state alone, whatever changes were made since (a
    /// limiter judges a change by its class word, not by the bucket).
    pub fn undo(&mut self, grant: &RefGrant, n: u32) -> u32 {
        let n = n.min(grant.n);
        if n == 0 || self.full_at != grant.full_at {
            return 0;
        }
        self.full_at -= u128::from(n) * self.interval;
        n
    }
}

/// Decodes fuzzer bytes into a config and an op sequence.
pub fn decode(data: &[u8]) -> (u32, u32, Vec<BucketOp>) {
    let mut r = ByteReader::new(data);
    let burst = u32::from(r.u8() % 16) + 1;
    let interval_ms = u32::from(r.u16() % 2000) + 1;
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 512 {
        let op = match r.u8() % 8 {
            0 => BucketOp::Advance {
                ns: u64::from(r.u32()) * 16,
            },
            1 => BucketOp::Advance {
                ns: u64::from(r.u8()),
            },
            2 => BucketOp::StepBack {
                ns: u64::from(r.u32()) * 4,
            },
            3 => BucketOp::Take {
                n: u32::from(r.u8() % 20),
            },
            4 => BucketOp::Peek {
                n: u32::from(r.u8() % 20),
            },
            5 => BucketOp::SetConfig {
                burst: u32::from(r.u8() % 24) + 1,
                interval_us: u32::from(r.u16() % 2000 + 1)
                    * if r.u8().is_multiple_of(2) { 1_000 } else { 1 },
            },
            6 => {
                let pick = r.u8();
                BucketOp::Refund {
                    pick,
                    n: u32::from(r.u8() % 20),
                    // One refund in eight into the twin (the pick's top bits; the bytes read
                    // are as before).
                    elsewhere: pick >= 224,
                }
            }
            _ => BucketOp::LateSetConfig {
                burst: u32::from(r.u8() % 24) + 1,
                interval_us: u32::from(r.u16() % 2000 + 1)
                    * if r.u8().is_multiple_of(2) { 1_000 } else { 1 },
                behind_ns: u64::from(r.u32()) * 4,
            },
        };
        ops.push(op);
    }
    (burst, interval_ms, ops)
}

/// The `bucket` fuzz target's body.
pub fn fuzz_bucket(data: &[u8]) {
    let (burst, interval_ms, ops) = decode(data);
    run(burst, interval_ms, 0, &ops);
}

/// Runs `ops` through the real bucket and the reference from reading `start_ns`, asserting
/// identical answers and the spec invariants after every step.
pub fn run(burst: u32, interval_ms: u32, start_ns: u64, ops: &[BucketOp]) {
    run_in(burst, interval_ms, 1_000_000, start_ns, ops);
}

/// How many of the latest grants a run keeps for `Refund` ops to name.
const GRANTS_KEPT: usize = 8;

/// The envelope of the no-mint invariant: the grants (net of refunds that gave back) at ticks
/// within `[first, latest]`, against the largest burst and the shortest interval in force
/// since the first of them.
#[derive(Debug, Default)]
struct Envelope {
    /// The earliest and latest ticks of any grant or reading since the first grant.
    first: Option<u64>,
    latest: u64,
    granted: u128,
    refunded: u128,
    most_burst: u128,
    least_interval: u128,
}

impl Envelope {
    fn grant(&mut self, n: u32, tick: u64, burst: u32, interval: u32) {
        let first = self.first.get_or_insert(tick);
        *first = (*first).min(tick);
        self.latest = self.latest.max(tick);
        self.granted += u128::from(n);
        self.in_force(burst, interval);
    }

    fn in_force(&mut self, burst: u32, interval: u32) {
        if self.first.is_some() {
            self.most_burst = self.most_burst.max(u128::from(burst));
            let interval = u128::from(interval);
            if self.least_interval == 0 || interval < self.least_interval {
                self.least_interval = interval;
            }
        }
    }

    fn check(&self, step: usize) {
        let Some(first) = self.first else {
            return;
        };
        let accrued = u128::from(self.latest - first) / self.least_interval;
        assert!(
            self.granted - self.refunded <= self.most_burst + accrued,
            "step {step}: minted: granted {} − refunded {} > burst {} + accrued {accrued}",
            self.granted,
            self.refunded,
            self.most_burst,
        );
    }
}

/// [`run`] for a config counting ticks of `tick_ns` nanoseconds (1 ms, or 1 µs: `interval`
/// is then in microseconds, and skipped if whole milliseconds, which count in milliseconds).
pub fn run_in(burst: u32, interval: u32, tick_ns: u64, start_ns: u64, ops: &[BucketOp]) {
    let config = if tick_ns == 1_000 {
        BucketConfig::new(burst, Duration::from_micros(u64::from(interval)))
    } else {
        BucketConfig::from_ms(burst, interval)
    };
    let Ok(config) = config else {
        return;
    };
    if config.tick().ns() != tick_ns {
        return;
    }
    let real = TokenBucket::new(config);
    // The twin: one config, the same takes and changes, its grants never refunded.
    let twin = TokenBucket::new(config);
    let mut reference = RefBucket::new(burst, interval).in_ticks_of(u128::from(tick_ns));
    let mut now: u64 = start_ns;
    // The limits in force (changed by `SetConfig`), in ticks.
    let (mut burst, mut interval) = (burst, interval);
    let mut envelope = Envelope::default();
    let mut grants: Vec<(BucketGrant, RefGrant)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            BucketOp::Advance { ns } => now = now.saturating_add(ns),
            BucketOp::StepBack { ns } => now = now.saturating_sub(ns),
            BucketOp::Take { n } => {
                let got = real.try_acquire_refundable_n_at(n, now);
                let _ = twin.try_acquire_refundable_n_at(n, now);
                let (want, granted) = reference.take_granting(n, u128::from(now));
                match (got, want) {
                    (Ok(grant), RefTake::Granted) => {
                        assert_eq!(grant.tokens(), n, "step {step}: grant names {n} tokens");
                        if let Some(granted) = granted {
                            envelope.grant(n, now / tick_ns, burst, interval);
                            grants.push((grant, granted));
                            if grants.len() > GRANTS_KEPT {
                                grants.remove(0);
                            }
                        }
                    }
                    (Err(BucketRefused::Empty(e)), RefTake::Empty { wait_ns }) => {
                        assert_eq!(e.wait().as_nanos(), wait_ns, "step {step}: wait differs");
                        assert!(e.retry_after_secs() >= 1);
                        check_retry_contract(&real, n, now, e.wait());
                    }
                    (
                        Err(BucketRefused::ExceedsBurst {
                            requested,
                            burst: b,
                        }),
                        RefTake::ExceedsBurst,
                    ) => {
                        assert_eq!((requested, b), (n, burst));
                    }
                    (got, want) => {
                        panic!("step {step} {op:?} at {now}: got {got:?}, want {want:?}")
                    }
                }
            }
            BucketOp::Peek { n } => {
                let now128 = u128::from(now);
                assert_eq!(
                    u128::from(real.available_at(now)),
                    reference.available(now128),
                    "step {step}: available differs"
                );
                let want_wait = reference
                    .ready_ns(n)
                    .map(|ready| ready.saturating_sub(now128));
                let got_wait = real.wait_for_at(n, now).ok().map(|d| d.as_nanos());
                assert_eq!(got_wait, want_wait, "step {step}: wait_for differs");
                assert_eq!(
                    real.is_full_at(now),
                    reference.available(now128) == u128::from(burst),
                    "step {step}: is_full differs"
                );
            }
            BucketOp::Refund { pick, n, elsewhere } => {
                if grants.is_empty() {
                    continue;
                }
                // A refund consumes its grant: a grant is given back at most once, so each
                // distinct grant's refund is counted once below.
                let (grant, granted) = grants.remove(usize::from(pick) % grants.len());
                let asked = n.min(grant.tokens());
                if elsewhere {
                    let before = (twin.available_at(now), twin.wait_for_at(1, now));
                    let got = twin.refund(grant, n);
                    let want = if asked == 0 {
                        Refunded::Nothing
                    } else {
                        Refunded::OtherInstance
                    };
                    assert_eq!(got, want, "step {step}: a grant refunded into the twin");
                    let after = (twin.available_at(now), twin.wait_for_at(1, now));
                    assert_eq!(after, before, "step {step}: the twin's bucket moved");
                    continue;
                }
                let got = real.refund(grant, n);
                let given = reference.refund(&granted, n);
                assert!(
                    given <= asked,
                    "step {step}: gave back more than the grant took"
                );
                let want = match (asked, given) {
                    (0, _) => Refunded::Nothing,
                    (_, 0) => Refunded::Void,
                    (_, tokens) => Refunded::Exact { tokens },
                };
                assert_eq!(got, want, "step {step}: {op:?} at {now}");
                envelope.refunded += u128::from(given);
            }
            BucketOp::SetConfig {
                burst: b,
                interval_us,
            }
            | BucketOp::LateSetConfig {
                burst: b,
                interval_us,
                ..
            } => {
                let behind = match *op {
                    BucketOp::LateSetConfig { behind_ns, .. } => behind_ns,
                    _ => 0,
                };
                let reading = now.saturating_sub(behind);
                let Ok(config) =
                    BucketConfig::new(b, Duration::from_micros(u64::from(interval_us)))
                else {
                    continue;
                };
                let fits = if tick_ns == 1_000 {
                    u64::from(b) * u64::from(interval_us) <= 1 << 38
                } else {
                    interval_us % 1_000 == 0
                };
                let ticks = u32::try_from(u64::from(interval_us) * 1_000 / tick_ns).unwrap();
                // What the bucket owes where the change will be counted (its reading, or for a
                // faster rate the latest tick a take or change used; for a debt longer than the
                // longest the configs allow, the tick at which it was that long), and when it
                // is full again. `None`: the change would carry a debt beyond the unit.
                let mut probe = reference.clone();
                let counted = probe.set_limits(b, ticks, u128::from(reading));
                let at_ns = counted.map_or(reading, |(_, c)| u64::try_from(c).unwrap() * tick_ns);
                let owed_before = reference.owed(u128::from(at_ns));
                let full_before = real.is_full_at(at_ns);
                let full_in_before = real.wait_for_at(burst, now);
                let interval_before = interval;
                let _ = twin.set_config_at(config, reading);
                let checked = real.check_config(&config);
                let got = real.set_config_at(config, reading);
                assert_eq!(got, checked, "step {step}: check_config disagrees");
                match got {
                    Ok(()) => {
                        assert!(
                            fits && counted.is_some(),
                            "step {step}: {op:?} taken by a bucket it does not fit"
                        );
                        reference = probe;
                        (burst, interval) = (b, ticks);
                        envelope.in_force(burst, interval);
                        assert_eq!(
                            real.config(),
                            config,
                            "step {step}: config() is not the new one"
                        );
                        // A full bucket stays full, and one that owes tokens still owes them
                        // all, whatever the new burst: nothing is forgiven.
                        assert_eq!(
                            real.is_full_at(at_ns),
                            full_before,
                            "step {step}: fullness changed"
                        );
                        assert_eq!(
                            u128::from(real.available_at(at_ns)),
                            u128::from(burst).saturating_sub(owed_before),
                            "step {step}: {op:?} did not carry the {owed_before} tokens owed over"
                        );
                        assert!(
                            reference.owed(u128::from(at_ns)) >= owed_before,
                            "step {step}: {op:?} forgave tokens owed"
                        );
                        // And, unless the rate is now faster, it is never back sooner.
                        if interval >= interval_before {
                            assert!(
                                real.wait_for_at(burst, now).ok() >= full_in_before.ok(),
                                "step {step}: {op:?} brought the bucket back sooner"
                            );
                        }
                    }
                    Err(crate::bucket::BucketConfigError::DebtBeyondUnit { .. }) => {
                        assert!(fits && counted.is_none(), "step {step}: {op:?} refused");
                    }
                    Err(e) => {
                        assert!(!fits, "step {step}: {op:?} refused: {e}");
                        assert!(matches!(
                            e,
                            crate::bucket::BucketConfigError::DoesNotFitUnit { .. }
                        ));
                    }
                }
            }
        }
        if envelope.first.is_some() {
            envelope.latest = envelope.latest.max(now / tick_ns);
        }
        // Invariant 1: never more than the burst.
        assert!(real.available_at(now) <= burst);
        // Invariant 3, across changes and refunds: the envelope.
        envelope.check(step);
    }
}

/// Invariant 5: a take exactly `wait` later would succeed, one nanosecond sooner would not.
fn check_retry_contract(real: &TokenBucket, n: u32, now: u64, wait: Duration) {
    let wait_ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    assert!(wait_ns > 0, "a refusal must never report a zero wait");
    let at = now.saturating_add(wait_ns);
    assert_eq!(
        real.wait_for_at(n, at),
        Ok(Duration::ZERO),
        "not ready after the wait"
    );
    assert!(
        real.wait_for_at(n, at - 1)
            .is_ok_and(|w| w > Duration::ZERO),
        "ready one nanosecond before the reported wait"
    );
}
