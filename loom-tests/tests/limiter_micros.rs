//! Loom models of the microsecond limiter's epochs (`limiter::epoch`): a migration racing a
//! charge on one entry, two deciders past the epoch racing to migrate (one helps the other
//! finish), and a first charge racing a migration.
//!
//! Burst 2, one token per 100 µs; tables of four slots with fixed hash keys. Epoch 0 is based
//! at 0 and lasts `P` = 2^39 µs: a reading past `P` migrates every entry onto its own base.

use admit::{BucketConfig, Limiter, ManualClock};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

const US: u64 = 1_000;
/// The epoch length in nanoseconds.
const P: u64 = (1 << 39) * US;

fn limiter() -> Arc<Limiter<ManualClock>> {
    let config = BucketConfig::new(2, Duration::from_micros(100)).unwrap();
    Arc::new(
        Limiter::builder()
            .cap(3)
            .geometry(2, 4)
            .hash_keys(7, 11)
            .build_with_clock([config], ManualClock::starting_at(P + 1_000 * US))
            .unwrap(),
    )
}

fn spawn_charge(
    l: &Arc<Limiter<ManualClock>>,
    id: &'static [u8],
    now: u64,
) -> thread::JoinHandle<bool> {
    let l = l.clone();
    thread::spawn(move || l.try_acquire_at(id, 0, now).is_ok())
}

/// x is full (charged long ago). B charges x just before the epoch ends while A's decision
/// just after it migrates every entry. B's charge is never lost and never doubled: at `P + 10
/// µs` x holds exactly one token, whichever landed first (the migration raises a full entry
/// to its base, which is still one token short at that reading).
#[test]
fn a_migration_racing_a_charge_on_one_entry() {
    loom::model(|| {
        let l = limiter();
        assert!(l.try_acquire_at(b"x", 0, 1_000 * US).is_ok());
        let b = spawn_charge(&l, b"x", P - 10 * US);
        let a = spawn_charge(&l, b"y", P + 10 * US);
        assert!(b.join().unwrap());
        assert!(a.join().unwrap());
        assert_eq!(
            l.entry_tokens_at(b"x", 0, P + 10 * US),
            Some(1),
            "x's charge"
        );
        assert_eq!(
            l.entry_tokens_at(b"y", 0, P + 10 * US),
            Some(1),
            "y's charge"
        );
        assert_eq!(
            l.entry_tokens_at(b"x", 0, P + 210 * US),
            Some(2),
            "x refills"
        );
    });
}

/// x owes 150 µs across the end of the epoch. Two deciders past it race to start the
/// migration (one base wins) and to finish it (either may, the other helping): x's debt is
/// carried exactly, and both charges land.
#[test]
fn two_deciders_past_the_epoch_migrate_once_and_keep_every_debt() {
    loom::model(|| {
        let l = limiter();
        assert!(l.try_acquire_at(b"x", 0, P - 50 * US).is_ok());
        assert!(l.try_acquire_at(b"x", 0, P - 50 * US).is_ok());
        let a = spawn_charge(&l, b"y", P + 10 * US);
        let b = spawn_charge(&l, b"z", P + 20 * US);
        assert!(a.join().unwrap());
        assert!(b.join().unwrap());
        // Drained at P − 50 µs: full at P + 150 µs, so one token from P + 50 µs on.
        assert_eq!(l.entry_tokens_at(b"x", 0, P + 49 * US), Some(0));
        assert_eq!(l.entry_tokens_at(b"x", 0, P + 50 * US), Some(1));
        assert_eq!(l.entry_tokens_at(b"x", 0, P + 150 * US), Some(2));
        assert_eq!(l.len(), 3);
    });
}

/// A first charge of z (reading before the epoch ends) races a migration by another decider:
/// z's entry is born charged exactly once, whether its insert or its charge lands before,
/// during or after the pass.
#[test]
fn a_first_charge_racing_a_migration() {
    loom::model(|| {
        let l = limiter();
        let z = spawn_charge(&l, b"z", P - 10 * US);
        let a = spawn_charge(&l, b"y", P + 10 * US);
        assert!(z.join().unwrap());
        assert!(a.join().unwrap());
        assert_eq!(
            l.entry_tokens_at(b"z", 0, P + 10 * US),
            Some(1),
            "z's charge"
        );
        assert_eq!(l.entry_tokens_at(b"z", 0, P + 90 * US), Some(2), "z, exact");
    });
}
