//! The two profile tests that look inside: the limiter's entries behind the profile (through
//! the test hook `entry_tokens_at` and the crate-private `class_of`). Everything a user can see
//! of the profile is tested through the public API in `tests/api/registrar.rs`.

use super::checkpoint::class_of;
use super::*;
use crate::clock::ManualClock;
use std::time::Duration;

/// A clock reading far enough on that every reading these tests hand to an `_at` method is one
/// the clock has already produced (see `clock::ReadingAhead`).
const LATE: u64 = 1 << 60;
const MS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Mint,
    Retire,
}

impl Verb for Op {
    const ALL: &'static [Self] = &[Op::Mint, Op::Retire];

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            Op::Mint => "mint",
            Op::Retire => "retire",
        }
    }
}

fn small(admission: (u32, u32), refusal: (u32, u32)) -> RegistrarConfig {
    RegistrarConfig {
        rate_limit_admission_burst: admission.0,
        rate_limit_admission_refill_interval_ms: admission.1,
        rate_limit_predecision_refusal_burst: refusal.0,
        rate_limit_predecision_refusal_refill_interval_ms: refusal.1,
    }
}

#[test]
fn the_entry_cap_and_the_overflow_rules_hold_through_the_profile() {
    let registrar = RegistrarLimiter::<Op>::builder(small((1, 60_000), (1, 60_000)))
        .cap(4)
        .build_with_clock(CountingSink::new(), ManualClock::new())
        .unwrap();
    let memory = registrar.memory_bytes();
    // Four identities drain their (Mint, Admission) entries: the table is at its cap.
    for id in [b"a", b"b", b"c", b"d"] {
        assert!(!registrar
            .enter_admission(id, Op::Mint)
            .unwrap()
            .via_overflow());
    }
    assert_eq!(registrar.len(), 4);
    // No entry carries (Retire, Admission): its overflow bucket pays, then throttles.
    assert!(registrar
        .enter_admission(b"e", Op::Retire)
        .unwrap()
        .via_overflow());
    assert!(registrar.enter_admission(b"f", Op::Retire).is_err());
    assert_eq!(
        registrar.overflow_charges(Op::Retire, Bucket::Admission),
        Some(2)
    );
    assert_eq!(
        registrar.overflow_charges(Op::Mint, Bucket::Admission),
        Some(0)
    );
    assert_eq!(
        registrar.sink().counts().admission,
        1,
        "the throttle was an event"
    );
    // The same on check point 1: suppressed on the overflow bucket, never unlimited.
    assert_eq!(registrar.enter_predecision(b"g", Op::Mint), Records::Write);
    assert_eq!(registrar.enter_predecision(b"h", Op::Mint), Records::Skip);
    assert_eq!(
        registrar.len(),
        4,
        "overflow buckets are not counted against the cap"
    );
    // Drained entries were not removed to make room: "a" is still throttled on its own entry.
    assert!(registrar.enter_admission(b"a", Op::Mint).is_err());
    assert_eq!(
        registrar.overflow_charges(Op::Mint, Bucket::Admission),
        Some(0)
    );
    assert_eq!(
        registrar
            .limiter
            .entry_tokens_at(b"a", class_of(Op::Mint, Bucket::Admission).unwrap(), 0),
        Some(0)
    );

    // A minute later every entry is full: a new key reclaims them all and gets its own.
    registrar.clock().advance(Duration::from_secs(60));
    assert!(!registrar
        .enter_admission(b"i", Op::Mint)
        .unwrap()
        .via_overflow());
    assert_eq!(registrar.len(), 1);

    // Churn far beyond the cap: never above it, memory fixed.
    let identities = if cfg!(miri) { 200 } else { 20_000u32 };
    for i in 0..identities {
        registrar.clock().advance_ns(MS);
        let id = i.to_le_bytes();
        let _ = registrar.enter_admission(&id, Op::Mint);
        let _ = registrar.enter_predecision(&id, Op::Retire);
        assert!(registrar.len() <= registrar.cap());
    }
    assert_eq!(registrar.memory_bytes(), memory);
}

#[test]
fn no_path_removes_an_entry_below_its_burst() {
    let registrar = RegistrarLimiter::<Op>::builder(small((2, 1_000), (2, 1_000)))
        .cap(2)
        .build_with_clock(NoopSink, ManualClock::starting_at(LATE))
        .unwrap();
    assert!(registrar.enter_admission_at(b"victim", Op::Mint, 0).is_ok());
    let class = class_of(Op::Mint, Bucket::Admission).unwrap();
    let pushes = if cfg!(miri) { 20 } else { 1_000u32 };
    for i in 0..pushes {
        let now = 999 * MS;
        let _ = registrar.enter_admission_at(&i.to_le_bytes(), Op::Mint, now);
        let _ = registrar.enter_predecision_at(&i.to_le_bytes(), Op::Mint, now);
        registrar.reclaim_full_at(now).unwrap();
    }
    assert_eq!(
        registrar
            .limiter
            .entry_tokens_at(b"victim", class, 999 * MS),
        Some(1),
        "the victim's entry kept its debt"
    );
}
