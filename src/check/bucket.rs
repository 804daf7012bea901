//! The token bucket against a sequential reference model in `u128` arithmetic.
//!
//! The reference states the rules in terms of debt, the time still owed before the bucket is
//! full, with none of the implementation's packing, clamping or saturation. The driver runs an
//! op sequence through both and asserts identical answers, identical waits, and the
//! spec-level invariants that do not depend on either formulation.

use super::bytes::ByteReader;
use crate::bucket::{BucketConfig, BucketRefused, TokenBucket};
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
    /// Give `n` tokens back.
    Refund { n: u32 },
    /// Change the limits at runtime to `burst` per `interval_us` microseconds (refused by a
    /// millisecond bucket if not whole milliseconds, or by a microsecond one if too long).
    SetConfig { burst: u32, interval_us: u32 },
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
        }
    }

    /// The same bucket counting ticks of `tick_ns` nanoseconds (its interval and `full_at`
    /// are then in those ticks).
    pub fn in_ticks_of(self, tick_ns: u128) -> Self {
        Self { tick_ns, ..self }
    }

    /// The limits changed at runtime at reading `now_ns`: the rule of "Limits changed at
    /// runtime" in the bucket docs, written as debt. The time still owed `x` is `x / T`
    /// tokens; under the new interval `T′` they are `x · T′ / T` of time (rounded up to a
    /// tick), but at most a full new burst `B′ · T′`, unless `x` itself is more.
    pub fn set_limits(&mut self, burst: u32, interval: u32, now_ns: u128) {
        let (burst, interval) = (u128::from(burst), u128::from(interval));
        let debt = self.debt(now_ns);
        if debt > 0 {
            let carried = (debt * interval)
                .div_ceil(self.interval)
                .min(debt.max(burst * interval));
            self.full_at = now_ns / self.tick_ns + carried;
        }
        self.burst = burst;
        self.interval = interval;
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
        let Some(ready) = self.ready_ns(n) else {
            return RefTake::ExceedsBurst;
        };
        if ready > now_ns {
            return RefTake::Empty {
                wait_ns: ready - now_ns,
            };
        }
        if n > 0 {
            let now_tick = now_ns / self.tick_ns;
            self.full_at = now_tick + self.debt(now_ns) + u128::from(n) * self.interval;
        }
        RefTake::Granted
    }

    pub fn refund(&mut self, n: u32, now_ns: u128) {
        let debt = self.debt(now_ns);
        if debt == 0 {
            return;
        }
        let credit = (u128::from(n) * self.interval).min(debt);
        self.full_at -= credit;
    }
}

/// Decodes fuzzer bytes into a config and an op sequence.
pub fn decode(data: &[u8]) -> (u32, u32, Vec<BucketOp>) {
    let mut r = ByteReader::new(data);
    let burst = u32::from(r.u8() % 16) + 1;
    let interval_ms = u32::from(r.u16() % 2000) + 1;
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 512 {
        let op = match r.u8() % 7 {
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
            _ => BucketOp::Refund {
                n: u32::from(r.u8() % 20),
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
    let interval_ms = interval;
    let real = TokenBucket::new(config);
    let mut reference = RefBucket::new(burst, interval).in_ticks_of(u128::from(tick_ns));
    let mut now: u64 = start_ns;
    let mut latest_ms: u64 = now / tick_ns;
    let mut first_grant_ms: Option<u64> = None;
    // The limits in force (changed by `SetConfig`); the mint bound counts from the last change.
    let (mut burst, mut interval_ms) = (burst, interval_ms);
    let mut granted: u128 = 0;
    let mut refunded: u128 = 0;
    for (step, op) in ops.iter().enumerate() {
        match *op {
            BucketOp::Advance { ns } => now = now.saturating_add(ns),
            BucketOp::StepBack { ns } => now = now.saturating_sub(ns),
            BucketOp::Take { n } => {
                let got = real.try_acquire_n_at(n, now);
                let want = reference.take(n, u128::from(now));
                match (got, want) {
                    (Ok(()), RefTake::Granted) => {
                        if n > 0 {
                            granted += u128::from(n);
                            first_grant_ms.get_or_insert(now / tick_ns);
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
            BucketOp::Refund { n } => {
                real.refund_at(n, now);
                reference.refund(n, u128::from(now));
                refunded += u128::from(n);
            }
            BucketOp::SetConfig {
                burst: b,
                interval_us,
            } => {
                let Ok(config) =
                    BucketConfig::new(b, Duration::from_micros(u64::from(interval_us)))
                else {
                    continue;
                };
                let full_before = real.is_full_at(now);
                let owed_before = reference.owed(u128::from(now));
                // When the bucket is full again: the wait for its whole burst.
                let full_in_before = real.wait_for_at(burst, now);
                let interval_before = interval_ms;
                let fits = if tick_ns == 1_000 {
                    u64::from(b) * u64::from(interval_us) <= 1 << 38
                } else {
                    interval_us % 1_000 == 0
                };
                let ticks = u32::try_from(u64::from(interval_us) * 1_000 / tick_ns).unwrap();
                match real.set_config_at(config, now) {
                    Ok(()) => {
                        assert!(
                            fits,
                            "step {step}: {op:?} taken by a bucket it does not fit"
                        );
                        reference.set_limits(b, ticks, u128::from(now));
                        (burst, interval_ms) = (b, ticks);
                        assert_eq!(
                            real.config(),
                            config,
                            "step {step}: config() is not the new one"
                        );
                        // The mint bound restarts from the change (it holds from any state).
                        first_grant_ms = None;
                        granted = 0;
                        refunded = 0;
                        latest_ms = now / tick_ns;
                    }
                    Err(e) => {
                        assert!(!fits, "step {step}: {op:?} refused: {e}");
                        assert!(matches!(
                            e,
                            crate::bucket::BucketConfigError::DoesNotFitUnit { .. }
                        ));
                    }
                }
                // A full bucket stays full, and one that owes tokens still owes them all.
                assert_eq!(
                    real.is_full_at(now),
                    full_before,
                    "step {step}: fullness changed"
                );
                assert_eq!(
                    u128::from(real.available_at(now)),
                    u128::from(burst).saturating_sub(owed_before),
                    "step {step}: {op:?} did not carry the {owed_before} tokens owed over"
                );
                // And, unless the rate is now faster, it is never back sooner than before.
                if interval_ms >= interval_before {
                    assert!(
                        real.wait_for_at(burst, now).ok() >= full_in_before.ok(),
                        "step {step}: {op:?} brought the bucket back sooner"
                    );
                }
            }
        }
        latest_ms = latest_ms.max(now / tick_ns);
        // Invariant 1: never more than the burst.
        assert!(real.available_at(now) <= burst);
        // Invariant 3: grants never exceed burst + accrual since the first grant, plus refunds.
        if let Some(first) = first_grant_ms {
            let accrued = u128::from(latest_ms.saturating_sub(first)) / u128::from(interval_ms);
            assert!(
                granted <= u128::from(burst) + accrued + refunded,
                "step {step}: minted: granted {granted} > burst {burst} + accrued {accrued} + refunded {refunded}"
            );
        }
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
