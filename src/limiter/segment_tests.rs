//! The reclaim hint's segments: a saturated miss scans at most one segment (its key's), the
//! misses of many keys reach every segment, and the idle sweep still scans them all.

use super::hint::SEGMENT_SLOTS;
use super::*;
use crate::clock::ManualClock;
use std::time::Duration;

const MS: u64 = 1_000_000;
const LATE: u64 = 1 << 60;

/// A limiter of `cap` entries, burst 1 per 10 ms: an entry charged at `t` is full at `t + 10 ms`.
fn limiter(cap: usize) -> Limiter<ManualClock> {
    let config = BucketConfig::new(1, Duration::from_millis(10)).unwrap();
    Limiter::builder()
        .cap(cap)
        .build_with_clock([config], ManualClock::starting_at(LATE))
        .unwrap()
}

/// Fills `l` to its cap at reading `at` with names `first..`; returns how many took an entry.
fn fill_at(l: &Limiter<ManualClock>, first: u64, at: u64) -> usize {
    let mut charged = 0;
    let mut i = first;
    while l.len() < l.cap() {
        // A name whose window is full pays the overflow bucket (and may be refused by it).
        let entry = l.try_acquire_at(&i, 0, at).is_ok_and(|g| !g.via_overflow());
        charged += usize::from(entry);
        i += 1;
    }
    charged
}

/// Fills `l` to its cap at reading 0.
fn fill(l: &Limiter<ManualClock>) -> usize {
    fill_at(l, 0, 0)
}

#[test]
fn a_small_table_is_one_segment_and_a_large_one_several() {
    assert_eq!(limiter(4_096).hint.segments(), 1);
    assert_eq!(
        limiter(crate::DEFAULT_CAP).hint.segments(),
        10,
        "65,536 entries: 163,840 slots"
    );
    let large = limiter(1 << 16);
    let slots = large.table.slots();
    assert_eq!(large.hint.segments(), slots.div_ceil(SEGMENT_SLOTS));
    assert!(large.hint.segments() >= 4, "{slots} slots");
    // The segments tile the table.
    let mut next = 0;
    for segment in 0..large.hint.segments() {
        let range = large.hint.slots_of(segment, slots);
        assert_eq!(range.start, next);
        assert!(range.len() <= SEGMENT_SLOTS);
        next = range.end;
    }
    assert_eq!(next, slots);
}

#[test]
fn a_saturated_miss_scans_one_segment_and_the_misses_of_many_keys_reach_them_all() {
    let l = limiter(1 << 16);
    let cap = l.cap();
    assert_eq!(fill_at(&l, 0, 0), cap);
    let segments = l.hint.segments();
    // At 10 ms every entry charged at 0 is full. Each miss at the cap frees at most its own
    // segment's entries, not the table's; the table is filled again (with entries not full
    // until 20 ms) before the next miss.
    let mut names = cap as u64;
    let mut scans = 0;
    for k in 0..40 * segments as u64 {
        assert_eq!(l.len(), cap);
        let entry = l
            .try_acquire_at(&(u64::MAX - k), 0, 10 * MS)
            .is_ok_and(|g| !g.via_overflow());
        let freed = cap + usize::from(entry) - l.len();
        assert!(
            freed <= SEGMENT_SLOTS,
            "miss {k} freed {freed} entries: more than one segment holds"
        );
        assert!(
            l.len() > cap / 2,
            "a whole-table scan would leave {}",
            l.len()
        );
        scans += usize::from(freed > 0);
        names += fill_at(&l, names, 10 * MS) as u64;
    }
    // Every segment was scanned by some miss (each key's segment is its hash's: a segment is
    // missed by 40 × 10 misses with probability 0.9^400, about 5·10^-19): no entry charged at
    // 0 is left, and each segment was scanned once (a scanned segment's hint moves to 20 ms).
    assert_eq!(scans, segments);
    assert_eq!(l.reclaim_full_at(10 * MS).unwrap(), 0);
    assert_eq!(l.reclaim_full_at(20 * MS).unwrap(), cap);
}

#[test]
fn the_idle_sweep_scans_every_segment() {
    let l = limiter(1 << 16);
    let cap = l.cap();
    fill(&l);
    assert_eq!(l.reclaim_full_at(10 * MS).unwrap(), cap);
    assert_eq!(l.len(), 0);
}

#[test]
fn a_newborn_lowers_only_its_segment() {
    let l = limiter(1 << 16);
    fill(&l);
    // A sweep at 10 ms frees every entry: no segment keeps one, so none is due again...
    assert_eq!(l.reclaim_full_at(10 * MS).unwrap(), l.cap());
    let segments = l.hint.segments();
    let never = l.hint.tick_of(0);
    assert!((0..segments).all(|s| l.hint.tick_of(s) == never));
    // ...until a newborn, full at 20 ms, lowers the segment holding its slot, and only it.
    assert!(!l.try_acquire_at(&7u64, 0, 10 * MS).unwrap().via_overflow());
    let lowered: Vec<usize> = (0..segments)
        .filter(|&s| l.hint.tick_of(s) != never)
        .collect();
    assert_eq!(lowered.len(), 1, "{lowered:?}");
    assert_eq!(l.hint.tick_of(lowered[0]), 20);
}
