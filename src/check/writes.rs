//! What each decision writes, checked line by line.
//!
//! Built only with `RUSTFLAGS="--cfg admit_writes"`, where every atomic of the crate comes from
//! [`crate::sync::writes`] and notes the cache line of each write it makes on the calling
//! thread (a store, a swap, every read-modify-write, every compare-exchange attempt: a failed
//! CAS takes its line exclusive too). Default features, no metrics attached, a
//! [`ManualClock`].
//!
//! # Invariant
//!
//! **A hit writes only its key's own state**: the lines of the key's entry or counters, found
//! through each primitive's own lookup, never hard-coded. No per-instance or process-wide
//! line, except a word that says what is *latest* (a primitive's horizon, the latest reading
//! it has seen; a volume quota's window header, the newest window counted in), and each of
//! those at most once per tick across every decision of that tick. A decision at a reading
//! the primitive has already seen writes no such word at all. What the hit paths write, with
//! no option on:
//!
//! | decision | lines written |
//! |---|---|
//! | limiter hit (milliseconds or microseconds) | 1: the key's entry (its slot word) |
//! | limiter refusal | none |
//! | in-flight acquire, and its release | 1: the actor's entry (its count) |
//! | volume charge | one per row (4 by default): the actor's bucket in each row, on purpose |
//! | gate, one key, all three defences | the sum of the three: 1 + 1 + rows, and 1 on the pass's drop |
//!
//! Options that write a shared line on every decision are opt-in and documented there:
//! metrics (their counters), an owned permit or pass (its handle's reference count, which this
//! recorder does not see: `Arc` is `std`'s). Not hits, and not checked here: a first charge
//! writes more (the insert's claim and tag, the live count, the reclaim hint), and a limiter
//! counting microseconds migrates every entry to a new epoch base on its first decision past
//! the epoch (every 2^37 µs, 1.6 days): that decision writes the epoch state, one base and
//! every member's slot word.

use crate::actor::HashedActor;
use crate::bucket::BucketConfig;
use crate::clock::{Clock, ManualClock};
use crate::fairness::Quotas;
use crate::gate::Gate;
use crate::limiter::Limiter;
use crate::quota::{Quota, RateLimit};
use crate::sync::writes::{self, Line};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One tick of the decision clock.
const TICK: Duration = Duration::from_millis(1);
/// Ticks each test runs through, and decisions per tick.
const TICKS: usize = 25;
const PER_TICK: usize = 3;

/// The lines `f` writes on this thread, and its answer.
fn recorded<R>(f: impl FnOnce() -> R) -> (R, BTreeSet<Line>) {
    writes::start();
    let answer = f();
    (answer, writes::lines())
}

/// Checks that every line one decision wrote is one of `own` or of `latest`, and that no
/// latest line is written twice in one tick (`per_tick` counts them). Answers how many latest
/// lines it wrote.
fn check(
    what: &str,
    wrote: &BTreeSet<Line>,
    own: &BTreeSet<Line>,
    latest: &BTreeSet<Line>,
    per_tick: &mut BTreeMap<Line, usize>,
) -> usize {
    let stray: Vec<_> = wrote
        .iter()
        .filter(|l| !own.contains(l) && !latest.contains(l))
        .collect();
    assert!(
        stray.is_empty(),
        "{what}: wrote {} line(s) that are neither the key's own ({own:?}) nor a latest word \
         ({latest:?}): {stray:?}",
        stray.len()
    );
    let mut written_latest = 0;
    for line in wrote.iter().filter(|l| latest.contains(l)) {
        let times = per_tick.entry(*line).or_default();
        *times += 1;
        assert!(
            *times <= 1,
            "{what}: latest word on line {line} written {times} times in one tick"
        );
        written_latest += 1;
    }
    written_latest
}

fn hashed(name: &str) -> HashedActor {
    HashedActor::new(name)
}

fn limiter(config: BucketConfig, clock: &ManualClock) -> Limiter<ManualClock> {
    Limiter::builder()
        .build_with_clock([config], clock.clone())
        .unwrap()
}

/// Hits on one warmed key of `limiter`, `PER_TICK` to a tick for `TICKS` ticks, at the clock's
/// reading: each writes its entry's line and nothing else but the horizon, at most once a
/// tick.
fn limiter_hits(what: &str, limiter: &Limiter<ManualClock>, clock: &ManualClock) {
    let actor = hashed("hot");
    limiter
        .try_acquire_hashed_at(&actor, 0, 1, clock.now_ns())
        .unwrap();
    let own: BTreeSet<_> = limiter.entry_line(&actor, 0).into_iter().collect();
    assert_eq!(own.len(), 1, "{what}: the warmed key has an entry");
    let latest: BTreeSet<_> = limiter.horizon_lines().collect();
    let mut latest_writes = 0;
    for _ in 0..TICKS {
        clock.advance(TICK);
        let mut per_tick = BTreeMap::new();
        for i in 0..PER_TICK {
            let now = clock.now_ns();
            let (granted, wrote) = recorded(|| limiter.try_acquire_hashed_at(&actor, 0, 1, now));
            assert!(granted.is_ok(), "{what}: a hit is granted");
            latest_writes += check(what, &wrote, &own, &latest, &mut per_tick);
            let own_written: BTreeSet<_> = wrote.difference(&latest).copied().collect();
            assert_eq!(
                own_written, own,
                "{what}: a hit writes its entry, decision {i}"
            );
        }
    }
    assert!(
        latest_writes <= TICKS,
        "{what}: the horizon written {latest_writes} times in {TICKS} ticks"
    );
    eprintln!(
        "{what}: {} line a hit; the horizon written {latest_writes} times in {} hits over \
         {TICKS} ticks",
        own.len(),
        TICKS * PER_TICK
    );
}

#[test]
fn a_limiter_hit_writes_only_its_entry() {
    let clock = ManualClock::new();
    let fast = limiter(
        BucketConfig::new(1_000_000, Duration::from_millis(1)).unwrap(),
        &clock,
    );
    limiter_hits("limiter hit (ms)", &fast, &clock);
}

#[test]
fn a_limiter_hit_counting_microseconds_writes_only_its_entry() {
    let clock = ManualClock::new();
    let fine = limiter(
        BucketConfig::new(1_000_000, Duration::from_micros(1_500)).unwrap(),
        &clock,
    );
    limiter_hits("limiter hit (µs)", &fine, &clock);
}

#[test]
fn a_limiter_refusal_writes_nothing_of_its_own() {
    let clock = ManualClock::new();
    let slow = limiter(BucketConfig::per_minute(1).unwrap(), &clock);
    let actor = hashed("refused");
    let now = clock.now_ns();
    slow.try_acquire_hashed_at(&actor, 0, 1, now).unwrap();
    let latest: BTreeSet<_> = slow.horizon_lines().collect();
    for _ in 0..TICKS {
        clock.advance(TICK);
        let mut per_tick = BTreeMap::new();
        for _ in 0..PER_TICK {
            let now = clock.now_ns();
            let (refused, wrote) = recorded(|| slow.try_acquire_hashed_at(&actor, 0, 1, now));
            assert!(refused.is_err(), "one token a minute: refused");
            check(
                "limiter refusal",
                &wrote,
                &BTreeSet::new(),
                &latest,
                &mut per_tick,
            );
        }
    }
}

#[test]
fn an_in_flight_acquire_and_release_write_only_the_actors_count() {
    let quotas = Quotas::builder().quota(16).build().unwrap();
    let actor = hashed("busy");
    // The first acquire inserts the entry (born dirty, then cleaned): the miss path.
    drop(quotas.try_acquire_hashed(&actor).unwrap());
    let own: BTreeSet<_> = quotas.entry_line(&actor).into_iter().collect();
    assert_eq!(own.len(), 1, "the warmed actor has an entry");
    let none = BTreeSet::new();
    let mut per_tick = BTreeMap::new();
    for _ in 0..TICKS {
        let (first, wrote) = recorded(|| quotas.try_acquire_hashed(&actor).unwrap());
        check("in-flight acquire", &wrote, &own, &none, &mut per_tick);
        assert_eq!(wrote, own, "an acquire (0 -> 1) writes the actor's count");
        let (second, wrote) = recorded(|| quotas.try_acquire_hashed(&actor).unwrap());
        assert_eq!(wrote, own, "an acquire (1 -> 2) writes the actor's count");
        let ((), wrote) = recorded(|| drop(second));
        assert_eq!(wrote, own, "a release (2 -> 1) writes the actor's count");
        let ((), wrote) = recorded(|| drop(first));
        assert_eq!(
            wrote, own,
            "a release to zero writes the actor's count (and no drain waits: no wake)"
        );
    }
}

#[test]
fn a_volume_charge_writes_only_the_actors_rows() {
    let clock = ManualClock::new();
    // A 10 ms window, so that the run turns it twice: the header is written then.
    let quota = Quota::new(1_000_000, 1 << 23, Duration::from_millis(10)).unwrap();
    let volume = RateLimit::with_clock(quota, clock.clone());
    let actor = hashed("heavy");
    volume
        .try_acquire_hashed_at(&actor, 10, clock.now_ns())
        .unwrap();
    let own = volume.row_lines(&actor);
    assert!(!own.is_empty() && own.len() <= quota.rows());
    let latest = volume.latest_lines();
    assert!(own.is_disjoint(&latest));
    let mut latest_writes = 0;
    for _ in 0..TICKS {
        clock.advance(TICK);
        let mut per_tick = BTreeMap::new();
        for i in 0..PER_TICK {
            let now = clock.now_ns();
            let (charged, wrote) = recorded(|| volume.try_acquire_hashed_at(&actor, 10, now));
            assert!(charged.is_ok());
            latest_writes += check("volume charge", &wrote, &own, &latest, &mut per_tick);
            let own_written: BTreeSet<_> = wrote.difference(&latest).copied().collect();
            assert_eq!(
                own_written, own,
                "a charge writes each row's bucket, decision {i}"
            );
        }
    }
    assert!(latest_writes <= 2 * TICKS);
    eprintln!(
        "volume charge: {} lines a charge ({} rows); the horizon and header written \
         {latest_writes} times in {} charges over {TICKS} ticks",
        own.len(),
        quota.rows(),
        TICKS * PER_TICK
    );
}

#[test]
fn a_gate_admission_of_one_key_writes_only_that_keys_state() {
    let clock = ManualClock::new();
    let quota = Quota::new(1_000_000, 1 << 23, Duration::from_secs(60)).unwrap();
    let gate = Gate::new()
        .in_flight(Quotas::builder().quota(16).build().unwrap())
        .rate(
            limiter(
                BucketConfig::new(1_000_000, Duration::from_millis(1)).unwrap(),
                &clock,
            ),
            0,
        )
        .volume(RateLimit::with_clock(quota, clock.clone()));
    let actor = hashed("client");
    drop(
        gate.try_acquire_hashed_at(&actor, 10, clock.now_ns())
            .unwrap(),
    );
    let (Some(quotas), Some((limiter, _)), Some(volume)) =
        (gate.quotas(), gate.limiter(), gate.volume_quota())
    else {
        panic!("the gate has all three defences");
    };
    let place: BTreeSet<_> = quotas.entry_line(&actor).into_iter().collect();
    let mut own = place.clone();
    own.extend(limiter.entry_line(&actor, 0));
    own.extend(volume.row_lines(&actor));
    assert_eq!(own.len(), place.len() + 1 + volume.row_lines(&actor).len());
    let mut latest: BTreeSet<_> = limiter.horizon_lines().collect();
    latest.extend(volume.latest_lines());
    for _ in 0..TICKS {
        clock.advance(TICK);
        let mut per_tick = BTreeMap::new();
        for i in 0..PER_TICK {
            let now = clock.now_ns();
            let (pass, wrote) = recorded(|| gate.try_acquire_hashed_at(&actor, 10, now).unwrap());
            check("gate admission", &wrote, &own, &latest, &mut per_tick);
            let own_written: BTreeSet<_> = wrote.difference(&latest).copied().collect();
            assert_eq!(
                own_written, own,
                "an admission writes its three defences, {i}"
            );
            let ((), wrote) = recorded(|| drop(pass));
            assert_eq!(wrote, place, "a pass's drop writes the in-flight count");
        }
    }
}
