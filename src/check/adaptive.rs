//! The adaptive total against a sequential reference: L, the total, the open window's samples
//! and the age ring stepped one op at a time, with the limit's rule stated again here (AIMD:
//! over the target or an op older than two targets, L × 9/10 and at least one less; under it
//! with half of L in flight, L + 1; within the bounds), so that the proptest and the `adaptive`
//! fuzz target check the lock-free plumbing and the rule together: the same L after every op,
//! the same total, every sample folded once, every admission below its class's share.

use super::bytes::ByteReader;
use crate::fairness::{AdaptivePermit, AdaptiveTotal, Priority, Quotas, Shares};
use crate::{Clock, ManualClock};
use std::time::Duration;

/// One step of a history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdaptiveOp {
    /// Try to admit one op of `actor` in class `priority`.
    Acquire { actor: u8, priority: Priority },
    /// Drop the `index`-th held permit (modulo how many are held): the writer decides it.
    Release { index: u16 },
    /// The `index`-th held permit's response headers are out (its body still streams): its
    /// sample is taken now, its place kept.
    Respond { index: u16 },
    /// The clock moves on.
    Advance { us: u32 },
    /// New bounds and shares at runtime (the target stays).
    Configure {
        floor: u32,
        ceiling: u32,
        normal: u32,
        sheddable: u32,
    },
}

/// The target of every checked history: 1 ms.
pub const TARGET: Duration = Duration::from_millis(1);
/// Each actor's quota.
pub const QUOTA: u32 = 3;
const BUCKETS: usize = 16;

/// The reference, sequential.
#[derive(Debug)]
pub struct RefTotal {
    pub limit: u32,
    pub total: u32,
    floor: u32,
    ceiling: u32,
    normal: u32,
    sheddable: u32,
    target_ns: u64,
    window_end: u64,
    /// The open window: its samples and their sum, in units of 1024 ns.
    pub samples: u64,
    sum_units: u64,
    pub folded: u64,
    /// The age ring: per bucket, the epoch it counts and its count.
    ring: [(u64, u64); BUCKETS],
    shift: u32,
    counts: [u32; 256],
}

impl RefTotal {
    pub fn new(config: &AdaptiveTotal, now: u64) -> Self {
        let (floor, ceiling) = config.bounds();
        let target_ns = TARGET.as_nanos() as u64;
        let shares = config.class_shares();
        Self {
            limit: config.initial_limit().clamp(floor, ceiling),
            total: 0,
            floor,
            ceiling,
            normal: shares.of(Priority::Normal),
            sheddable: shares.of(Priority::Sheddable),
            target_ns,
            window_end: now + target_ns,
            samples: 0,
            sum_units: 0,
            folded: 0,
            ring: [(0, 0); BUCKETS],
            shift: (target_ns / 4).max(1024).ilog2(),
            counts: [0; 256],
        }
    }

    fn share(&self, priority: Priority) -> u32 {
        match priority {
            Priority::Critical => 1000,
            Priority::Normal => self.normal,
            Priority::Sheddable => self.sheddable,
        }
    }

    /// `Ok(())` if admitted; `Err(Some(share))` if the total refused, `Err(None)` the quota.
    pub fn acquire(&mut self, actor: u8, priority: Priority, now: u64) -> Result<(), Option<u32>> {
        if self.counts[usize::from(actor)] >= QUOTA {
            return Err(None);
        }
        let share = self.share(priority);
        // The class is admitted while total < L × share / 1000.
        if u64::from(self.total) * 1000 >= u64::from(self.limit) * u64::from(share) {
            self.close_if_due(now);
            return Err(Some(share));
        }
        self.counts[usize::from(actor)] += 1;
        self.total += 1;
        let epoch = now >> self.shift;
        let bucket = &mut self.ring[(epoch as usize) % BUCKETS];
        // An empty bucket takes this epoch; a busy one keeps the older of the two.
        bucket.0 = if bucket.1 == 0 {
            epoch
        } else {
            bucket.0.min(epoch)
        };
        bucket.1 += 1;
        self.close_if_due(now);
        Ok(())
    }

    /// The op admitted at `since` is decided; `sampled` if its sample was taken at its
    /// response's headers already (then its release frees its place alone, reading no clock,
    /// and closes no window).
    pub fn release(&mut self, actor: u8, since: u64, sampled: bool, now: u64) {
        self.counts[usize::from(actor)] -= 1;
        self.total -= 1;
        if !sampled {
            self.sample(since, now);
            self.close_if_due(now);
        }
    }

    /// The op admitted at `since` has its response's headers out: its sample, not its place.
    pub fn respond(&mut self, since: u64, now: u64) {
        self.sample(since, now);
        self.close_if_due(now);
    }

    fn sample(&mut self, since: u64, now: u64) {
        self.samples += 1;
        self.sum_units += (now.saturating_sub(since) >> 10).min(1 << 24);
        self.ring[((since >> self.shift) as usize) % BUCKETS].1 -= 1;
    }

    fn close_if_due(&mut self, now: u64) {
        if now >= self.window_end {
            self.window_end = now + self.target_ns;
            self.close(now);
        }
    }

    /// The oldest op's age by the ring: the oldest busy bucket's epoch, less one epoch.
    pub fn oldest(&self, now: u64) -> u64 {
        let now_epoch = now >> self.shift;
        self.ring
            .iter()
            .filter(|b| b.1 > 0)
            .map(|b| now_epoch.saturating_sub(b.0).saturating_sub(1) << self.shift)
            .max()
            .unwrap_or(0)
    }

    fn close(&mut self, now: u64) {
        let n = self.samples;
        let mean = (self.sum_units << 10).checked_div(n).unwrap_or(0);
        self.folded += n;
        self.samples = 0;
        self.sum_units = 0;
        let congested = (n > 0 && mean > self.target_ns) || self.oldest(now) > 2 * self.target_ns;
        let l = self.limit;
        self.limit = if congested {
            (l * 9 / 10).min(l - 1).max(self.floor)
        } else if n > 0 && 2 * self.total >= l {
            (l + 1).min(self.ceiling)
        } else {
            l
        };
        self.limit = self.limit.clamp(self.floor, self.ceiling);
    }

    pub fn configure(&mut self, floor: u32, ceiling: u32, normal: u32, sheddable: u32) -> bool {
        let ok = floor >= 1
            && floor <= ceiling
            && ceiling <= crate::fairness::MAX_TOTAL_LIMIT
            && sheddable >= 1
            && sheddable <= normal
            && normal <= 1000;
        if ok {
            (self.floor, self.ceiling, self.normal, self.sheddable) =
                (floor, ceiling, normal, sheddable);
            self.limit = self.limit.clamp(floor, ceiling);
        }
        ok
    }
}

/// Runs `ops` against quotas with an adaptive total and against the reference, asserting the
/// invariants after every step.
pub fn run(initial: u32, floor: u32, ceiling: u32, ops: &[AdaptiveOp]) {
    let clock = ManualClock::starting_at(1 << 30);
    let config = AdaptiveTotal::new(TARGET)
        .initial(initial)
        .floor(floor)
        .ceiling(ceiling);
    let quotas = Quotas::builder()
        .quota(QUOTA)
        .actors(512)
        .build_adaptive_with_clock(config, clock.clone())
        .unwrap();
    let mut reference = RefTotal::new(&config, clock.now_ns());
    // Each held permit: its actor, its admission, whether its response is out, the permit.
    let mut held: Vec<(u8, u64, bool, AdaptivePermit<'_, ManualClock>)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let now = clock.now_ns();
        match *op {
            AdaptiveOp::Acquire { actor, priority } => {
                let (limit, total) = (reference.limit, reference.total);
                let got = quotas.try_acquire_as(&actor, priority);
                let want = reference.acquire(actor, priority, now);
                match (got, want) {
                    (Ok(permit), Ok(())) => {
                        // Invariant 1: below L and below the class's share of L, at admission.
                        let share = u64::from(reference.share(priority));
                        assert!(
                            u64::from(total) * 1000 < u64::from(limit) * share,
                            "step {step}: admitted at {total} of L {limit}, share {share}"
                        );
                        held.push((actor, now, false, permit));
                    }
                    (Err(e), Err(Some(share))) => {
                        let by_total = e.total().expect("a refusal by the total");
                        assert_eq!(
                            (by_total.priority(), by_total.share_permille()),
                            (priority, share),
                            "step {step}"
                        );
                        assert_eq!((by_total.limit(), by_total.in_flight()), (limit, total));
                    }
                    (Err(e), Err(None)) => {
                        assert!(e.total().is_none(), "step {step}: {e}");
                        // Invariant 2: refused at the actor's quota.
                        assert_eq!(e.limit(), QUOTA, "step {step}");
                    }
                    (got, want) => panic!("step {step} {op:?}: got {got:?}, want {want:?}"),
                }
            }
            AdaptiveOp::Release { index } => {
                if held.is_empty() {
                    continue;
                }
                let (actor, since, sampled, permit) =
                    held.swap_remove(usize::from(index) % held.len());
                permit.complete();
                reference.release(actor, since, sampled, now);
            }
            AdaptiveOp::Respond { index } => {
                let n = held.len();
                let Some((_, since, sampled, permit)) = held.get_mut(usize::from(index) % n.max(1))
                else {
                    continue;
                };
                permit.responded();
                if !*sampled {
                    *sampled = true;
                    reference.respond(*since, now);
                }
            }
            AdaptiveOp::Advance { us } => {
                clock.advance(Duration::from_micros(u64::from(us)));
            }
            AdaptiveOp::Configure {
                floor,
                ceiling,
                normal,
                sheddable,
            } => {
                let config = Shares::permille(normal, sheddable).map(|shares| {
                    AdaptiveTotal::new(TARGET)
                        .floor(floor)
                        .ceiling(ceiling)
                        .shares(shares)
                });
                let got = config.map(|c| quotas.configure(c));
                let ok = matches!(got, Ok(Ok(())));
                assert_eq!(
                    ok,
                    reference.configure(floor, ceiling, normal, sheddable),
                    "step {step}: {got:?}"
                );
            }
        }
        // Invariant 3: L within its bounds, and the same L as the reference's rule.
        assert_eq!(quotas.limit(), reference.limit, "step {step}: L");
        assert!(
            (reference.floor..=reference.ceiling).contains(&reference.limit),
            "step {step}: L out of bounds"
        );
        assert_eq!(quotas.in_flight(), reference.total, "step {step}: total");
        assert_eq!(u64::from(reference.total), held.len() as u64);
        // Invariant 4: every sample folded once, or in the open window.
        assert_eq!(
            quotas.model_samples(),
            (reference.folded, reference.samples),
            "step {step}: samples"
        );
        // The ring's age is never younger than the true oldest's less one epoch.
        let now = clock.now_ns();
        if let Some(oldest) = held
            .iter()
            .filter(|(_, _, sampled, _)| !sampled)
            .map(|(_, since, _, _)| now - since)
            .max()
        {
            let epoch = 1 << reference.shift;
            assert!(
                reference.oldest(now) + 2 * epoch > oldest,
                "step {step}: the ring under-ages the oldest op"
            );
        }
    }
    drop(held);
    assert_eq!(quotas.in_flight(), 0);
}

/// Decodes fuzzer bytes: L's first value, floor and ceiling from the first three; then up to
/// 400 ops over 8 actors.
pub fn decode(data: &[u8]) -> (u32, u32, u32, Vec<AdaptiveOp>) {
    let mut r = ByteReader::new(data);
    let initial = u32::from(r.u8() % 24) + 1;
    let floor = u32::from(r.u8() % 4) + 1;
    let ceiling = floor + u32::from(r.u8() % 24);
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 400 {
        ops.push(match r.u8() % 16 {
            0..=5 => AdaptiveOp::Acquire {
                actor: r.u8() % 8,
                priority: match r.u8() % 3 {
                    0 => Priority::Critical,
                    1 => Priority::Normal,
                    _ => Priority::Sheddable,
                },
            },
            6..=9 => AdaptiveOp::Release { index: r.u16() },
            10 => AdaptiveOp::Respond { index: r.u16() },
            11..=14 => AdaptiveOp::Advance {
                us: u32::from(r.u16() % 3_000),
            },
            _ => AdaptiveOp::Configure {
                floor: u32::from(r.u8() % 5),
                ceiling: u32::from(r.u8() % 30),
                normal: u32::from(r.u16() % 1_100),
                sheddable: u32::from(r.u16() % 1_100),
            },
        });
    }
    (initial, floor, ceiling, ops)
}

/// The `adaptive` fuzz target's body.
pub fn fuzz_adaptive(data: &[u8]) {
    let (initial, floor, ceiling, ops) = decode(data);
    run(initial, floor, ceiling, &ops);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn priority() -> impl Strategy<Value = Priority> {
        prop_oneof![
            Just(Priority::Critical),
            Just(Priority::Normal),
            Just(Priority::Sheddable)
        ]
    }

    fn op() -> impl Strategy<Value = AdaptiveOp> {
        prop_oneof![
            5 => (0..8u8, priority()).prop_map(|(actor, priority)| AdaptiveOp::Acquire { actor, priority }),
            5 => any::<u16>().prop_map(|index| AdaptiveOp::Release { index }),
            1 => any::<u16>().prop_map(|index| AdaptiveOp::Respond { index }),
            4 => (0..3_000u32).prop_map(|us| AdaptiveOp::Advance { us }),
            1 => (0..4u32, 0..30u32, 0..1_100u32, 0..1_100u32).prop_map(
                |(floor, ceiling, normal, sheddable)| AdaptiveOp::Configure { floor, ceiling, normal, sheddable }
            ),
        ]
    }

    proptest! {
        #![proptest_config(crate::check::proptest_config(256))]

        #[test]
        fn adaptive_total_matches_the_reference(
            initial in 1..24u32,
            floor in 1..4u32,
            span in 0..24u32,
            ops in proptest::collection::vec(op(), 0..300),
        ) {
            run(initial, floor, floor + span, &ops);
        }
    }
}
