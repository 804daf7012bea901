//! The lease thread: the only code that talks to Redis. Decisions never wait for it.
//!
//! It drains the request ring, asks Redis for each key's lease with the GCRA script (one
//! `EVALSHA`, `EVAL` on `NOSCRIPT` after a restart or a `SCRIPT FLUSH`), and adds what was
//! granted to the key's lease word with one CAS. Every socket operation has a timeout
//! (`io_timeout`); a timeout, a refused or dropped connection marks the fleet *down* (decisions
//! follow the fail policy) and the thread reconnects with exponential backoff, from
//! `MIN_BACKOFF_MS` doubling to `MAX_BACKOFF_MS`. An unexpected answer for one key (a wrong
//! type, a value that is not a bucket) marks that key `FAULT` and leaves the others alone. The
//! thread sleeps in `park_timeout` when idle; a decision that queued a request unparks it (one
//! atomic swap, and a futex wake only when the thread is parked).
//!
//! What the thread decides (what to ask, what an answer does to a word, which debts to
//! collect, when to sweep and to reconnect) lives in `worker_core.rs`, with its invariants;
//! this file is the loop around it: the ring, the Redis calls, the counters, parking.

use super::backend::{lease, Link, Reply, Store};
use super::identity::FleetKey;
use super::script::GCRA_LEASE;
use super::Shared;
use crate::clock::Clock;
use crate::fleet_lease as lease_word;
use crate::fleet_worker_core::{Core, Now, Words, IDLE_PARK_MS};
use crate::sync::atomic::Ordering;
use crate::table::Verdict;
use std::time::{Duration, Instant};

/// The lease table as the core sees it: words by packed key.
struct TableWords<'a, C: Clock> {
    shared: &'a Shared<C>,
}

impl<C: Clock> TableWords<'_, C> {
    fn key(&self, key: u64) -> crate::table::Key {
        self.shared.hasher.key_of_hash(FleetKey(key).table_hash())
    }
}

impl<C: Clock> Words for TableWords<'_, C> {
    fn read(&self, key: u64) -> Option<u64> {
        self.shared.table.get(&self.key(key))
    }

    fn apply<R>(&self, key: u64, mut f: impl FnMut(u64) -> (u64, R)) -> Option<R> {
        self.shared.table.update_member(&self.key(key), |w| {
            let (next, r) = f(w);
            Verdict::Commit(next, r)
        })
    }

    fn rewrite(&self, f: impl Fn(u64) -> Option<u64>, going: impl Fn() -> bool) {
        self.shared.table.rewrite(|word, _| f(word), going);
    }

    fn debtors(&self, mut visit: impl FnMut(u64, u64)) {
        self.shared.table.scan(|slot, word| {
            if lease_word::in_debt(word) {
                // Relaxed: the key is checked against its own word by the collection's CAS;
                // a record not yet landed is found by a later sweep.
                let key = self
                    .shared
                    .debtors
                    .get(slot)
                    .map_or(0, |k| k.load(Ordering::Relaxed));
                if key != 0 {
                    visit(key, word);
                }
            }
        });
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

/// What one lease request came to.
enum Landed {
    /// Redis answered: tokens granted, wait, whether the key was created.
    Answer(Reply),
    /// The key's value is not a bucket.
    KeyFault,
    /// Not answered: the connection (or, in a cluster, the key's node or slot) failed.
    #[cfg_attr(not(feature = "redis-cluster"), allow(dead_code))]
    Lost,
}

/// The thread's body; returns when the limiter is dropped.
pub(crate) fn run<C: Clock>(shared: &Shared<C>, store: &Store, mut con: Option<Link>) {
    let script = redis::Script::new(GCRA_LEASE);
    let words = TableWords { shared };
    let start = Instant::now();
    let now = || Now {
        clock_ms: shared.clock.now_ns() / 1_000_000,
        mono_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    let mut core = Core::new(shared.table.cap(), shared.lease_cap, now());
    let mut head = 0usize;
    #[cfg(feature = "redis-cluster")]
    let mut finished = Vec::new();
    #[cfg(feature = "redis-cluster")]
    if let Some(Link::Cluster(link)) = con.as_mut() {
        attach(shared, link);
    }
    // Acquire: pairs with the Release store in `Drop`; nothing else rides on it.
    let going = || !shared.stop.load(Ordering::Acquire);
    while going() {
        // Up or down: a quiet identity's pending stamp must not wrap into the future.
        core.begin(&words, now(), going);
        match con.as_mut() {
            None => {
                // Down: requests are dropped (their keys stay PENDING until the timeout and
                // ask again; a debt is collected once up), decisions follow the fail policy.
                let clock_ms = now().clock_ms;
                drain(shared, &mut head, |key| core.lost(&words, key, clock_ms));
                if core.may_connect(now().mono_ms) {
                    match store.connect(shared.io_timeout) {
                        Ok(mut c) => {
                            match &mut c {
                                Link::Single(_) => shared.nodes.set_down(0, false),
                                #[cfg(feature = "redis-cluster")]
                                Link::Cluster(link) => attach(shared, link),
                            }
                            con = Some(c);
                            core.connected();
                            // Relaxed: counters.
                            shared.stats.reconnects.fetch_add(1, Ordering::Relaxed);
                            // Release: a decision reading UP sees nothing else from here;
                            // the flag alone chooses its path.
                            shared.down.store(false, Ordering::Release);
                        }
                        Err(_) => core.connect_failed(now().mono_ms),
                    }
                }
                if con.is_none() {
                    std::thread::park_timeout(Duration::from_millis(core.down_park_ms()));
                }
            }
            Some(Link::Single(c)) => {
                let mut failed = false;
                let mut taken = drain(shared, &mut head, |key| {
                    if failed || serve(shared, &script, c, &words, &mut core, key).is_err() {
                        failed = true;
                        core.lost(&words, key, now().clock_ms);
                    }
                });
                while !failed {
                    let Some(key) = core.next_debt(&words, now().clock_ms, &mut taken) else {
                        break;
                    };
                    // Still in debt (no decision paid it meanwhile), request claimed: ask.
                    if serve(shared, &script, c, &words, &mut core, key).is_err() {
                        failed = true;
                        core.lost(&words, key, now().clock_ms);
                    }
                }
                if failed {
                    con = None;
                    core.connection_lost(now().mono_ms);
                    // Relaxed: counters.
                    shared.stats.outages.fetch_add(1, Ordering::Relaxed);
                    shared.nodes.set_down(0, true);
                    // Release: see above.
                    shared.down.store(true, Ordering::Release);
                } else if taken == 0 {
                    std::thread::park_timeout(Duration::from_millis(IDLE_PARK_MS));
                }
            }
            #[cfg(feature = "redis-cluster")]
            Some(Link::Cluster(link)) => {
                let answered =
                    cluster_turn(shared, link, &words, &mut core, &mut head, &mut finished);
                if !answered {
                    std::thread::park_timeout(Duration::from_millis(IDLE_PARK_MS));
                }
            }
        }
    }
}

/// A cluster link made: node threads wake this thread, and every slot's state is published.
#[cfg(feature = "redis-cluster")]
fn attach<C: Clock>(shared: &Shared<C>, link: &mut super::cluster::ClusterLink) {
    link.attach(std::thread::current());
    publish(shared, link.initial());
}

/// Publishes what changed in the cluster: slot states for decisions, node names and
/// outages for the stats.
#[cfg(feature = "redis-cluster")]
fn publish<C: Clock>(shared: &Shared<C>, changes: super::cluster::Changes) {
    for (node, address) in &changes.named {
        shared.nodes.name(*node, address);
    }
    for &(node, up) in &changes.nodes {
        shared.nodes.set_down(node, !up);
        // Relaxed: counters.
        let counter = if up {
            &shared.stats.reconnects
        } else {
            &shared.stats.outages
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(slots) = &shared.slots {
        for &(slot, node, down) in &changes.slots {
            slots.set(slot, node, down);
        }
    }
}

/// One turn on a cluster: the answers that came back, then the ring and the due debts,
/// each request handed to its node's thread (never waited on). Returns whether anything
/// was taken or answered.
#[cfg(feature = "redis-cluster")]
fn cluster_turn<C: Clock>(
    shared: &Shared<C>,
    link: &mut super::cluster::ClusterLink,
    words: &TableWords<'_, C>,
    core: &mut Core,
    head: &mut usize,
    finished: &mut Vec<super::cluster::Finished>,
) -> bool {
    use super::cluster::Outcome;
    let clock_ms = || shared.clock.now_ns() / 1_000_000;
    publish(shared, link.poll(finished));
    let answered = !finished.is_empty();
    // Keys taken off the ring while their request was out, which came back unserved: asked
    // again now (an answer that landed served them already).
    let mut again = Vec::new();
    for f in finished.drain(..) {
        let landed = match f.outcome {
            Outcome::Answer(reply) => Landed::Answer(reply),
            Outcome::KeyFault => Landed::KeyFault,
            Outcome::Unserved => Landed::Lost,
        };
        if link.take_again(f.key) && matches!(landed, Landed::Lost) {
            again.push(f.key);
        }
        let granted = land(shared, words, core, f.key, f.asked, landed, clock_ms());
        shared.nodes.answered(f.node, f.took, u64::from(granted));
    }
    let revived = link.take_revived();
    let mut dispatch = |core: &mut Core, key: u64| {
        let started = Instant::now();
        let fleet_key = FleetKey(key);
        let class = shared.classes.get(usize::from(fleet_key.class())).copied();
        let Some(class) = class else {
            return;
        };
        if link.in_flight(key) {
            // One request per key at a time: this one waits for the one out. An answer lands
            // on the word and serves it; an unserved one has it asked again then.
            link.ask_again(key);
            core.lost(words, key, clock_ms());
            return;
        }
        let Some(asked) = core.plan(words, key, clock_ms()) else {
            return;
        };
        let redis_key = fleet_key.redis_key(&shared.prefix);
        match link.submit(key, redis_key, class, asked, shared.restart_drains) {
            // Relaxed: counters.
            Ok(()) => shared.stats.redis_calls.fetch_add(1, Ordering::Relaxed),
            Err(_) => {
                core.lost(words, key, clock_ms());
                0
            }
        };
        hold(shared, started);
    };
    for key in again {
        dispatch(core, key);
    }
    // Keys unserved while their node was down (or its queue full), the node now up: asked
    // again at once rather than once their request's stamp passed, if the word still waits
    // for a request (the link forgets a key once it is answered, so a pending word here is
    // that lost request's or a newer decision's, never a pace; a faulted one waits its
    // stamp). The lost request is replaced, not doubled: the link holds one request per key,
    // and a newer one still on the ring finds this one out and waits for its answer.
    let revived_any = !revived.is_empty();
    for key in revived {
        let waits = words
            .read(key)
            .is_some_and(|w| lease_word::pending(w) && !lease_word::faulted(w));
        if waits {
            dispatch(core, key);
        }
    }
    let mut taken = drain(shared, head, |key| dispatch(core, key));
    while let Some(key) = core.next_debt(words, clock_ms(), &mut taken) {
        dispatch(core, key);
    }
    for (node, full) in link.take_queue_full() {
        shared.nodes.queue_full(node, full);
    }
    answered || revived_any || taken > 0
}

/// Takes every queued request off the ring, counting those a lap overwrote.
fn drain<C: Clock>(shared: &Shared<C>, head: &mut usize, f: impl FnMut(u64)) -> usize {
    let mut overwritten = 0;
    let taken = shared.ring.drain_counting(head, &mut overwritten, f);
    if overwritten > 0 {
        // Relaxed: a counter.
        shared
            .stats
            .requests_overwritten
            .fetch_add(overwritten, Ordering::Relaxed);
    }
    taken
}

/// Records how long the lease thread was held by one request.
fn hold<C: Clock>(shared: &Shared<C>, started: Instant) {
    let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    // Relaxed: a statistic.
    shared.stats.max_hold_us.fetch_max(us, Ordering::Relaxed);
}

/// Hands one request's outcome to the core and the counters; returns the tokens granted.
fn land<C: Clock>(
    shared: &Shared<C>,
    words: &TableWords<'_, C>,
    core: &mut Core,
    key: u64,
    asked: u32,
    landed: Landed,
    now_ms: u64,
) -> u32 {
    let Some(class) = shared.classes.get(usize::from(FleetKey(key).class())) else {
        return 0;
    };
    match landed {
        Landed::Answer((granted, wait_us, fresh)) => {
            // Relaxed: counters.
            match fresh {
                1 => shared.stats.fresh_buckets.fetch_add(1, Ordering::Relaxed),
                2 => shared.stats.drained_buckets.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
            let fair_ms = if shared.pace_drained {
                lease_word::fair_ms(class.interval_us, shared.processes)
            } else {
                0
            };
            let granted = core.answered(words, key, asked, granted, wait_us, fair_ms, now_ms);
            // Relaxed: counters.
            shared
                .stats
                .tokens_granted
                .fetch_add(u64::from(granted), Ordering::Relaxed);
            let counter = if granted == 0 {
                &shared.stats.refusals
            } else {
                &shared.stats.leases_granted
            };
            // Relaxed: a counter.
            counter.fetch_add(1, Ordering::Relaxed);
            if granted > 0 && granted < asked {
                // Relaxed: a counter.
                shared.stats.partial_leases.fetch_add(1, Ordering::Relaxed);
            }
            if core.note_answer(key, asked, granted) {
                // Relaxed: a counter.
                shared
                    .stats
                    .refusals_after_partial
                    .fetch_add(1, Ordering::Relaxed);
            }
            granted
        }
        Landed::KeyFault => {
            // Relaxed: counters.
            shared.stats.key_faults.fetch_add(1, Ordering::Relaxed);
            core.faulted(words, key, now_ms);
            0
        }
        Landed::Lost => {
            core.lost(words, key, now_ms);
            0
        }
    }
}

/// Asks a single server for one key's lease and hands the answer to the core. `Err` only
/// when the connection failed.
fn serve<C: Clock>(
    shared: &Shared<C>,
    script: &redis::Script,
    con: &mut redis::Connection,
    words: &TableWords<'_, C>,
    core: &mut Core,
    key: u64,
) -> Result<(), ()> {
    let fleet_key = FleetKey(key);
    let Some(class) = shared.classes.get(usize::from(fleet_key.class())) else {
        return Ok(());
    };
    // No entry (reclaimed since), or nothing to ask: done.
    let clock_ms = |shared: &Shared<C>| shared.clock.now_ns() / 1_000_000;
    let Some(asked) = core.plan(words, key, clock_ms(shared)) else {
        return Ok(());
    };
    // Relaxed: counters.
    shared.stats.redis_calls.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    let answer = lease(
        con,
        script,
        &fleet_key.redis_key(&shared.prefix),
        *class,
        asked,
        shared.restart_drains,
    );
    let took = started.elapsed();
    hold(shared, started);
    let now_ms = clock_ms(shared);
    let landed = match answer {
        Ok(reply) => Landed::Answer(reply),
        // The caller marks the key lost and the connection down.
        Err(e) if connection_failed(&e) => {
            shared.nodes.answered(0, took, 0);
            return Err(());
        }
        Err(_) => Landed::KeyFault,
    };
    let granted = land(shared, words, core, key, asked, landed, now_ms);
    shared.nodes.answered(0, took, u64::from(granted));
    Ok(())
}
