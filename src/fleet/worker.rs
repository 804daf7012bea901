//! The lease thread: the only code that talks to Redis. Decisions never wait for it.
//!
//! It drains the request ring, asks Redis for each key's lease with the GCRA script (one
//! `EVALSHA`, `EVAL` on `NOSCRIPT` after a restart or a `SCRIPT FLUSH`), and adds what was
//! granted to the key's lease word with one CAS. Every socket operation has a timeout
//! (`io_timeout`); a timeout, a refused or dropped connection marks the fleet *down* (decisions
//! follow the fail policy) and the thread reconnects with exponential backoff, from
//! `MIN_BACKOFF` doubling to `MAX_BACKOFF`. An unexpected answer for one key (a wrong type, a
//! value that is not a bucket) marks that key `FAULT` and leaves the others alone. The thread
//! sleeps in `park_timeout` when idle; a decision that queued a request unparks it (one atomic
//! swap, and a futex wake only when the thread is parked).

use super::backend::{Link, Store};
use super::identity::FleetKey;
use super::lease;
use super::script::GCRA_LEASE;
use super::Shared;
use crate::clock::Clock;
use crate::sync::atomic::Ordering;
use crate::table::Verdict;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
const IDLE_PARK: Duration = Duration::from_millis(2);
/// How often the thread moves aged stamps up to the present (`lease::restamped`): more often
/// than the stamps can age into reading as ahead.
const SWEEP_EVERY: Duration = Duration::from_secs(2);

/// Most debts collected per turn of the loop, so that queued requests wait little.
const DEBTS_PER_TURN: usize = 64;

/// The debts this thread still has to collect: entries whose provisional token is unpaid
/// because Redis granted nothing to their first lease (a drained or spent budget), each with
/// the instant (ms of the injected clock) its pace ends (the stamp the refusal wrote). A
/// decision asks again only when its identity comes back; an identity that never does would
/// keep its entry in debt, and an entry in debt is never reclaimed (invariant 4), so without
/// this the table would silt up with them and refuse every new identity (`TableFull`). A
/// debt found with a decision's request out is put back for that request's stamp, in case
/// it is lost. Only this thread touches it; it holds at most twice the table's cap (a key may
/// be in it twice: the worker answered it twice while in debt), beyond which a debt is left
/// to its identity's next decision.
struct Debts {
    due: BinaryHeap<Reverse<(u64, u64)>>,
    max: usize,
}

impl Debts {
    fn new(cap: usize) -> Self {
        Self {
            due: BinaryHeap::new(),
            max: cap.saturating_mul(2),
        }
    }

    fn add(&mut self, due_ms: u64, key: FleetKey) {
        if self.due.len() < self.max {
            self.due.push(Reverse((due_ms, key.0)));
        }
    }

    /// The next key whose debt is due at `now_ms`.
    fn next_due(&mut self, now_ms: u64) -> Option<FleetKey> {
        match self.due.peek() {
            Some(Reverse((due, _))) if *due <= now_ms => {
                let top = self.due.pop();
                // One key due twice at one instant (a refusal's entry, and one put back to
                // wait for the same stamp): once.
                while top.is_some() && self.due.peek() == top.as_ref() {
                    self.due.pop();
                }
                top.map(|Reverse((_, key))| FleetKey(key))
            }
            _ => None,
        }
    }
}

/// Whether `e` says the connection (not the key) failed: the thread must reconnect.
fn connection_failed(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}

/// The thread's body; returns when the limiter is dropped.
pub(crate) fn run<C: Clock>(shared: &Shared<C>, store: &Store, mut con: Option<Link>) {
    let script = redis::Script::new(GCRA_LEASE);
    let mut head = 0usize;
    let mut backoff = MIN_BACKOFF;
    let mut next_try = Instant::now();
    let mut next_sweep = Instant::now() + SWEEP_EVERY;
    let mut debts = Debts::new(shared.table.cap());
    // Acquire: pairs with the Release store in `Drop`; nothing else rides on it.
    while !shared.stop.load(Ordering::Acquire) {
        if Instant::now() >= next_sweep {
            // Up or down: a quiet identity's pending stamp must not wrap into the future.
            let now_ms = shared.clock.now_ns() / 1_000_000;
            // Each CAS is the table's own (`Table::rewrite`): a decision racing it wins or
            // loses whole, and the sweep re-reads and re-judges the word it lost to.
            shared.table.rewrite(
                |word, _| lease::restamped(word, now_ms),
                // Acquire: as the loop's own check.
                || !shared.stop.load(Ordering::Acquire),
            );
            next_sweep = Instant::now() + SWEEP_EVERY;
        }
        match con.as_mut() {
            None => {
                // Down: requests are dropped (their keys stay PENDING until the timeout and
                // ask again), decisions follow the fail policy.
                shared.ring.drain(&mut head, |_| {});
                if Instant::now() >= next_try {
                    match store.connect(shared.io_timeout) {
                        Ok(c) => {
                            con = Some(c);
                            backoff = MIN_BACKOFF;
                            // Relaxed: counters.
                            shared.stats.reconnects.fetch_add(1, Ordering::Relaxed);
                            // Release: a decision reading UP sees nothing else from here;
                            // the flag alone chooses its path.
                            shared.down.store(false, Ordering::Release);
                        }
                        Err(_) => {
                            next_try = Instant::now() + backoff;
                            backoff = (backoff * 2).min(MAX_BACKOFF);
                        }
                    }
                }
                if con.is_none() {
                    std::thread::park_timeout(backoff.min(IDLE_PARK * 5));
                }
            }
            Some(c) => {
                let mut failed = false;
                let mut taken = shared.ring.drain(&mut head, |key| {
                    if !failed && serve(shared, &script, c, FleetKey(key), &mut debts).is_err() {
                        failed = true;
                    }
                });
                let now_ms = shared.clock.now_ns() / 1_000_000;
                while !failed && taken < DEBTS_PER_TURN {
                    let Some(key) = debts.next_due(now_ms) else {
                        break;
                    };
                    taken += 1;
                    // Still in debt (no decision paid it meanwhile), and its pace passed with no
                    // decision's request outstanding? Claim the request (one CAS, as a
                    // decision would) and make it: never a second call after one refusal.
                    // Still in debt but a decision's request is out (its stamp ahead): come
                    // back at that stamp, in case that request is lost.
                    let tkey = shared.hasher.key_of_hash(key.table_hash());
                    let claim = shared.table.update_member(&tkey, |w| {
                        lease::collect(w, now_ms).map_or_else(
                            || Verdict::Keep(lease::in_debt(w).then(|| lease::defer_ms(w, now_ms))),
                            |next| Verdict::Commit(next, None),
                        )
                    });
                    match claim {
                        Some(None) if serve(shared, &script, c, key, &mut debts).is_err() => {
                            failed = true;
                            debts.add(now_ms, key);
                        }
                        Some(Some(later)) => debts.add(now_ms + later.max(1), key),
                        _ => {}
                    }
                }
                if failed {
                    con = None;
                    next_try = Instant::now() + backoff;
                    // Relaxed: counters.
                    shared.stats.outages.fetch_add(1, Ordering::Relaxed);
                    // Release: see above.
                    shared.down.store(true, Ordering::Release);
                } else if taken == 0 {
                    std::thread::park_timeout(IDLE_PARK);
                }
            }
        }
    }
}

/// Asks Redis for one key's lease and credits what it granted. `Err` only when the
/// connection failed.
fn serve<C: Clock>(
    shared: &Shared<C>,
    script: &redis::Script,
    con: &mut Link,
    key: FleetKey,
    debts: &mut Debts,
) -> Result<(), ()> {
    let tkey = shared.hasher.key_of_hash(key.table_hash());
    let Some(class) = shared.classes.get(usize::from(key.class())) else {
        return Ok(());
    };
    // The entry may have been reclaimed since: then there is nobody to lease for.
    let Some(word) = shared.table.get(&tkey) else {
        return Ok(());
    };
    let asked = lease::request_size(word, shared.lease_cap);
    let now_ms = shared.clock.now_ns() / 1_000_000;
    if asked == 0 {
        shared.table.update_member(&tkey, |w| {
            Verdict::Commit(lease::granted(w, 0, 0, 0, now_ms, shared.lease_cap), ())
        });
        return Ok(());
    }
    // Relaxed: counters.
    shared.stats.redis_calls.fetch_add(1, Ordering::Relaxed);
    let answer = con.lease(
        script,
        &key.redis_key(&shared.prefix),
        *class,
        asked,
        shared.restart_drains,
    );
    let now_ms = shared.clock.now_ns() / 1_000_000;
    match answer {
        Ok((granted, wait_us, fresh)) => {
            // Relaxed: counters.
            match fresh {
                1 => shared.stats.fresh_buckets.fetch_add(1, Ordering::Relaxed),
                2 => shared.stats.drained_buckets.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
            let granted = u32::try_from(granted).unwrap_or(u32::MAX).min(asked);
            // Relaxed: counters.
            shared
                .stats
                .tokens_granted
                .fetch_add(u64::from(granted), Ordering::Relaxed);
            let mut wait_ms = wait_us.div_ceil(1000);
            // Relaxed: counters.
            if granted == 0 {
                shared.stats.refusals.fetch_add(1, Ordering::Relaxed);
                if shared.pace_drained {
                    // Not before this process's fair share of a token's time (plus jitter):
                    // a drained identity costs `rate / N` calls per second, not `rate`.
                    let fair = lease::fair_ms(class.interval_us, shared.processes);
                    wait_ms = lease::pace_ms(wait_ms, fair, key.0 ^ now_ms);
                }
            } else {
                shared.stats.leases_granted.fetch_add(1, Ordering::Relaxed);
            }
            // One CAS (retried on a concurrent decision): the balance only fell since `word`
            // was read (a provisional token lowers it too), so the debt, if any, is paid
            // first and balance + granted <= lease_cap - 1 (invariant 1).
            let owed = shared.table.update_member(&tkey, |w| {
                let next = lease::granted(w, asked, granted, wait_ms, now_ms, shared.lease_cap);
                Verdict::Commit(next, lease::in_debt(next))
            });
            if owed == Some(true) {
                // Nothing granted to an entry that owes its provisional token: collect it
                // when its pace has passed, whether or not its identity comes back.
                debts.add(now_ms + wait_ms.clamp(1, lease::MAX_DEFER_MS), key);
            }
            Ok(())
        }
        Err(e) if connection_failed(&e) => Err(()),
        Err(_) => {
            // Relaxed: counters.
            shared.stats.key_faults.fetch_add(1, Ordering::Relaxed);
            shared
                .table
                .update_member(&tkey, |w| Verdict::Commit(lease::faulted_at(w, now_ms), ()));
            Ok(())
        }
    }
}
