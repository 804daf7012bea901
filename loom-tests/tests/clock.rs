//! Loom model of the default clock's rule 1 (`admit::clock::RecentClock`): readings of the
//! recent-time word never go back, on one thread or across threads, while updaters (an old one
//! finishing its last round as a new one starts) store times out of order.

use admit::clock::LoomRecentTime;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

#[test]
fn readings_never_go_back_across_threads_while_two_updaters_race() {
    loom::model(|| {
        let time = Arc::new(LoomRecentTime::new());
        // What one reader saw, published to the other.
        let seen = Arc::new(AtomicU64::new(0));

        // Two updaters: the old one stores a later time than the new one's first store.
        let old = {
            let time = time.clone();
            thread::spawn(move || time.refresh(20))
        };
        let new = {
            let time = time.clone();
            thread::spawn(move || {
                time.refresh(10);
                time.refresh(30);
            })
        };
        let first = {
            let (time, seen) = (time.clone(), seen.clone());
            thread::spawn(move || {
                let a = time.read();
                let b = time.read();
                assert!(b >= a, "one thread saw time go back: {a} then {b}");
                // Release: publishes the reading after the reads that produced it.
                seen.store(b, Ordering::Release);
            })
        };
        // The second reader: a reading published to it (acquire) is never newer than its own
        // later reading of the word.
        let published = seen.load(Ordering::Acquire);
        let mine = time.read();
        assert!(
            mine >= published,
            "a reader saw {mine} after another saw {published}"
        );
        old.join().unwrap();
        new.join().unwrap();
        first.join().unwrap();
        assert_eq!(time.read(), 30, "the latest store wins whatever the order");
    });
}
