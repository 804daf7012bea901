//! Loom models of `TokenBucket`: racing takes, takes racing a refill, and an older reading.

use admit::{BucketConfig, Refunded, TokenBucket};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn bucket(burst: u32, interval_ms: u32) -> Arc<TokenBucket> {
    Arc::new(TokenBucket::new(
        BucketConfig::new(burst, Duration::from_millis(u64::from(interval_ms))).unwrap(),
    ))
}

/// Three threads racing `try_acquire` on a bucket holding two tokens: exactly two win.
#[test]
fn racing_takes_grant_exactly_min_n_k() {
    loom::model(|| {
        let b = bucket(2, 1_000);
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || b.try_acquire_at(0).is_ok())
            })
            .collect();
        let granted = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&ok| ok)
            .count();
        assert_eq!(granted, 2);
        assert_eq!(b.available_at(0), 0);
    });
}

/// A refund racing later takes: burst 1 per 10 ms, a take at 0 (A), then two threads take at
/// 10 ms (the bucket is full again there) while a third refunds A. A's token had refilled
/// into the cap by 10 ms, so whatever the interleaving exactly one take at 10 ms is granted
/// and the bucket is left with none at 10 ms: the refund gives back only what A removed and
/// has not since refilled. (Before refunds named their take, a refund landing after one taker
/// let the other take a second token at 10 ms.)
#[test]
fn a_refund_racing_later_takes_grants_no_token_twice() {
    loom::model(|| {
        let b = bucket(1, 10);
        let a = b.try_acquire_refundable_n_at(1, 0).unwrap();
        let takers: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || b.try_acquire_at(10 * MS).is_ok())
            })
            .collect();
        let refunder = {
            let b = b.clone();
            thread::spawn(move || b.refund(a, 1))
        };
        let refunded = refunder.join().unwrap();
        assert!(matches!(
            refunded,
            Refunded::Exact { tokens: 1 } | Refunded::Void
        ));
        let granted = takers
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&ok| ok)
            .count();
        assert_eq!(granted, 1, "granted {granted} at 10 ms of a burst-1 bucket");
        assert_eq!(b.available_at(10 * MS), 0);
    });
}

/// A refund racing a take it precedes: burst 2 per 1 s drained to one token by A at 0; a
/// thread takes at 0 while another refunds A. Either the refund lands first (exact: two
/// tokens, the taker takes one, one left) or after the take (void: the taker took the last
/// token, none left); never a token beyond the burst.
#[test]
fn a_refund_racing_a_take_is_exact_or_void() {
    loom::model(|| {
        let b = bucket(2, 1_000);
        let a = b.try_acquire_refundable_n_at(1, 0).unwrap();
        let taker = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire_at(0).is_ok())
        };
        let refunder = {
            let b = b.clone();
            thread::spawn(move || b.refund(a, 1))
        };
        let refunded = refunder.join().unwrap();
        assert!(taker.join().unwrap());
        let left = b.available_at(0);
        // Exact: the refund landed first and the taker took one of two; void: the taker took
        // the last token. The answer says which, and the bucket agrees.
        let want = match refunded {
            Refunded::Exact { tokens: 1 } => 1,
            Refunded::Void => 0,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            left, want,
            "{left} left after a refund that said {refunded:?}"
        );
    });
}

/// A racing thread holding an older reading mints nothing: the bucket was drained at 10 ms;
/// a thread at 20 ms may take the one token accrued, a thread still holding 5 ms may not take
/// anything, in any interleaving.
#[test]
fn an_older_reading_racing_a_newer_one_mints_nothing() {
    loom::model(|| {
        let b = bucket(1, 10);
        assert!(b.try_acquire_at(10 * MS).is_ok());
        let newer = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire_at(20 * MS).is_ok())
        };
        let older = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire_at(5 * MS).is_ok())
        };
        assert!(newer.join().unwrap());
        assert!(!older.join().unwrap());
        assert_eq!(b.available_at(20 * MS), 0);
    });
}
