//! A Redis Cluster, reached so that one node's failure stays that node's (feature
//! `redis-cluster`).
//!
//! The lease thread never waits on a node. It keeps the slot map (read with `CLUSTER
//! SLOTS`), computes each key's slot, and hands the request to the thread of the slot's
//! primary: one *node thread* per primary, each with its own `redis::Connection`, its own
//! bounded queue and every connect, write and read bounded by `io_timeout`. Answers come back
//! on one channel, which the lease thread drains between its turns. So a node that hangs
//! holds its own queue only: its keys' requests wait at most the call in progress plus its
//! queue's share of it (a failed call fails the whole queue at once, see below), while every
//! other node's leases go on. What the lease thread itself spends per request is a channel
//! send.
//!
//! * **Faults stay where they happen.** A node whose connection fails (refused, dropped, a
//!   call past `io_timeout`) is *down*: its thread answers every queued and new request for
//!   it at once as unserved, until it connects again and answers a `PING` (with backoff from
//!   10 ms doubling to 1 s, on its own timer; a stopped process still completes the TCP
//!   handshake, so a connection alone proves nothing). A key unserved so (or because its
//!   node's queue was full) is asked again as soon as its node is up, rather than once its
//!   request's 250 ms stamp passed, unless it was answered meanwhile (at most [`QUEUE`] such
//!   keys are held; the rest wait their stamp). `CLUSTERDOWN`, `TRYAGAIN`, `MASTERDOWN`, `LOADING` and `READONLY`
//!   make only the key's slot down, until a lease in that slot is answered. The lease thread
//!   publishes which slots are down (`nodes::SlotStates`): decisions for keys there, and
//!   only those, follow the fail policy.
//! * **A timed-out call's connection is never used again.** A late reply would otherwise be
//!   read as the next call's answer: the node thread drops the connection and makes a new
//!   one for the next request.
//! * **Redirects are followed here.** `MOVED` updates the slot's owner and asks for a fresh
//!   slot map; `ASK` sends `ASKING` and the call to the named node, on one connection, without
//!   changing the map. At most [`REDIRECTS`] per request; a request whose chain ran out (a
//!   migration under way, the map not yet caught up), or answered `TRYAGAIN`, is sent again
//!   to the slot's owner once a newer map arrived or after [`RETRY_AFTER`], whichever comes
//!   first, at most [`RETRIES`] times, and only then counts as unserved (its slot down): a
//!   reshard costs a request a few milliseconds, not its 250 ms stamp.
//! * **The map is refreshed off the lease thread**: a refresher thread queries the nodes the
//!   lease thread names (live ones first, then the seeds) all at once, keeping the first
//!   answer, within one `io_timeout`; after a `MOVED`, and every 250 ms while a node is down
//!   (a failover moves its slots to the promoted replica).
//! * **The request ring never backs up behind a node**: the lease thread drains it without
//!   waiting. A node's queue holds at most [`QUEUE`] requests; one more is unserved at once
//!   (counted in `FleetNodeStats::queue_full`; asked again when the node is up, or at its
//!   stamp; a debt is collected by the lease thread), never dropped from another node's
//!   queue or from the ring (`FleetStats::requests_overwritten` counts the ring's laps). The
//!   test `a_hung_primary_holds_only_its_own_slots` floods a stopped primary with three
//!   queues' worth of identities: the healthy keys' grants go on, the ring loses nothing;
//!   with the overflow made blocking, it fails.
//!
//! One request per key is in flight at a time, as with a single server: a key taken off the
//! ring while its previous request is still at a node waits for that request (its answer
//! lands on the word and serves the key; if it comes back unserved, the key is asked for
//! again at once), so a grant is always sized from the word after the previous one landed.

use super::backend::Reply;
use super::nodes::{key_slot, MAX_NODES, SLOTS, UNKNOWN_NODE};
use super::script::GCRA_LEASE;
use super::ClassBudget;
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, ServerErrorKind, Value};
use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Redirects (`MOVED`, `ASK`) followed per request: a `MOVED` then an `ASK` is the longest
/// chain a healthy cluster answers with during a migration.
pub(crate) const REDIRECTS: u8 = 2;
/// Times a request whose redirects ran out (or answered `TRYAGAIN`) is sent again.
pub(crate) const RETRIES: u8 = 3;
/// The longest a request waits for a newer map before it is sent again.
pub(crate) const RETRY_AFTER: Duration = Duration::from_millis(5);
/// Requests one node's queue holds.
pub(crate) const QUEUE: usize = 1024;
/// How often the map is read again while a node is down.
const REFRESH_WHILE_DOWN: Duration = Duration::from_millis(250);
/// The least time between two map reads.
const REFRESH_MIN_GAP: Duration = Duration::from_millis(50);
/// The node thread's first wait before reconnecting, doubled up to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(1_000);

/// One slot range of a map: `[start, end]` served by the primary at `address`.
type Range = (u16, u16, String);

/// One lease request for a node thread.
struct Job {
    key: u64,
    redis_key: String,
    class: ClassBudget,
    asked: u32,
    restart_drains: bool,
    /// Sent after an `ASK`: `ASKING` first, on the same connection.
    asking: bool,
}

/// What a node thread (or the refresher) reports.
enum Report {
    /// The script's answer for `key`.
    Answer { key: u64, reply: Reply },
    /// The key's value is not a bucket (or the script failed on it): a key fault.
    KeyFault { key: u64 },
    /// The node could not serve the key: its connection failed (`slot_only` false) or the
    /// slot is not served now (`CLUSTERDOWN` and the like).
    Unserved { key: u64, slot_only: bool },
    /// `TRYAGAIN`: the slot is migrating; the request may be sent again shortly.
    TryAgain { key: u64 },
    /// Redirected to `address` (`ask`: for this request only).
    Redirect {
        key: u64,
        slot: u16,
        address: String,
        ask: bool,
    },
    /// Node `node`'s connection was made (`true`) or failed (`false`).
    Node { node: u8, up: bool },
    /// A fresh slot map (`None`: no node answered).
    Map(Option<Vec<Range>>),
}

/// A report and the node it came from.
struct Tagged {
    node: u8,
    report: Report,
}

/// What happened to one request, for the lease thread's core.
pub(crate) enum Outcome {
    Answer(Reply),
    KeyFault,
    /// Not served: the key's node (or its slot) is down.
    Unserved,
}

/// A finished request, with where and how long.
pub(crate) struct Finished {
    pub(crate) key: u64,
    pub(crate) asked: u32,
    pub(crate) node: u8,
    pub(crate) took: Duration,
    pub(crate) outcome: Outcome,
}

/// What the lease thread must publish after a poll.
#[derive(Default)]
pub(crate) struct Changes {
    /// Slots whose (node, down) changed.
    pub(crate) slots: Vec<(u16, u8, bool)>,
    /// Nodes named for the first time: (index, address).
    pub(crate) named: Vec<(u8, String)>,
    /// Nodes whose connection failed (`false`) or was made.
    pub(crate) nodes: Vec<(u8, bool)>,
}

struct Node {
    address: String,
    jobs: SyncSender<Job>,
    up: bool,
    /// Requests that found its queue full since the lease thread last counted them.
    full: u64,
}

struct Flight {
    node: u8,
    since: Instant,
    job_key: String,
    class: ClassBudget,
    asked: u32,
    restart_drains: bool,
    slot: u16,
    redirects: u8,
    /// Times sent again after its redirects ran out or a `TRYAGAIN`.
    retries: u8,
    /// Set aside for a retry: sent again after this instant, or once a map newer than the
    /// generation noted arrived.
    parked: Option<(Instant, u64)>,
}

/// The lease thread's side of the cluster.
pub(crate) struct ClusterLink {
    seeds: Vec<ConnectionInfo>,
    timeout: Duration,
    nodes: Vec<Node>,
    by_address: HashMap<String, u8>,
    /// Each slot's owner (a node index, or `UNKNOWN_NODE`).
    owner: Box<[u8]>,
    /// Slots answered `CLUSTERDOWN` and the like, until a lease there is answered.
    slot_down: Box<[bool]>,
    /// What was last published, per slot: (node, down).
    published: Box<[(u8, bool)]>,
    in_flight: HashMap<u64, Flight>,
    /// Keys of the flights set aside for a retry (`Flight::parked`).
    parked: Vec<u64>,
    /// Maps applied so far, for the parked flights.
    maps: u64,
    /// Keys taken off the ring while their previous request was out: asked again when that
    /// request comes back unserved (an answer lands on the word and serves them too).
    again: HashSet<u64>,
    /// Keys whose request came back unserved because its node's connection failed (or found
    /// the node's queue full), with their slot: asked again as soon as the slot's node is up
    /// (at most `QUEUE` held; the rest ask again once their request's stamp passed).
    waiting: HashMap<u64, u16>,
    /// Keys of `waiting` whose node came up, for the lease thread to ask again.
    revived: Vec<u64>,
    reports: Receiver<Tagged>,
    reports_tx: Sender<Tagged>,
    refresh: Sender<Vec<ConnectionInfo>>,
    refreshing: bool,
    last_refresh: Instant,
    refresh_wanted: bool,
    /// The lease thread, for node threads to wake it when they report.
    waker: Arc<OnceLock<Thread>>,
}

/// The connection info of `seed` pointed at `address` (`host:port`), keeping its
/// credentials and database.
fn at_address(seed: &ConnectionInfo, address: &str) -> Option<ConnectionInfo> {
    let (host, port) = address.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    Some(
        seed.clone()
            .set_addr(ConnectionAddr::Tcp(host.to_owned(), port)),
    )
}

/// `host:port` of a connection info (TCP only).
fn address_of(info: &ConnectionInfo) -> Option<String> {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => Some(format!("{host}:{port}")),
        _ => None,
    }
}

/// A connection to `info`, made and checked (the client's handshake is a round trip) within
/// `deadline`, every later write and read bounded by `timeout`.
fn connect(
    info: &ConnectionInfo,
    deadline: Instant,
    timeout: Duration,
) -> redis::RedisResult<redis::Connection> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(timed_out());
    }
    let con = redis::Client::open(info.clone())?.get_connection_with_timeout(left)?;
    con.set_read_timeout(Some(timeout))?;
    con.set_write_timeout(Some(timeout))?;
    Ok(con)
}

/// A node thread's connection: made as [`connect`], then a `PING` answered, all within
/// `deadline`. A node that accepts connections but does not serve them (a stopped process:
/// the kernel completes the TCP handshake) is not up until it answers: its keys stay down
/// rather than flapping up for each new connection, and the reconnect backoff keeps doubling.
fn connect_answered(
    info: &ConnectionInfo,
    deadline: Instant,
    timeout: Duration,
) -> redis::RedisResult<redis::Connection> {
    let mut con = connect(info, deadline, timeout)?;
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(timed_out());
    }
    con.set_read_timeout(Some(left))?;
    redis::cmd("PING").query::<()>(&mut con)?;
    con.set_read_timeout(Some(timeout))?;
    Ok(con)
}

fn timed_out() -> RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within io_timeout").into()
}

/// Parses a `CLUSTER SLOTS` reply; an empty host is the queried node's.
fn parse_slots(value: &Value, queried_host: &str) -> Option<Vec<Range>> {
    let Value::Array(entries) = value else {
        return None;
    };
    let mut ranges = Vec::new();
    for entry in entries {
        let Value::Array(fields) = entry else {
            return None;
        };
        let int = |v: Option<&Value>| match v {
            Some(Value::Int(i)) => u16::try_from(*i).ok(),
            _ => None,
        };
        let start = int(fields.first())?;
        let end = int(fields.get(1))?;
        let Some(Value::Array(primary)) = fields.get(2) else {
            return None;
        };
        let host = match primary.first() {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            _ => return None,
        };
        let host = if host.is_empty() || host == "?" {
            queried_host.to_owned()
        } else {
            host
        };
        let port = int(primary.get(1))?;
        if usize::from(end) >= SLOTS || start > end {
            return None;
        }
        ranges.push((start, end, format!("{host}:{port}")));
    }
    Some(ranges)
}

/// Reads the slot map from the first of `candidates` to answer, all asked at once, within
/// one `timeout` in all. A node that hangs costs nothing beyond that.
pub(crate) fn read_map(candidates: &[ConnectionInfo], timeout: Duration) -> Option<Vec<Range>> {
    let deadline = Instant::now() + timeout;
    let (tx, rx) = mpsc::channel();
    for info in candidates {
        let (tx, info) = (tx.clone(), info.clone());
        // A thread per candidate, ending by itself within the deadline (every operation of
        // it is bounded by what is left of it); a failed spawn is one candidate fewer.
        let _ = std::thread::Builder::new()
            .name("admit-fleet-slots".to_owned())
            .spawn(move || {
                let host = match info.addr() {
                    ConnectionAddr::Tcp(host, _) => host.clone(),
                    _ => String::new(),
                };
                let left = deadline.saturating_duration_since(Instant::now());
                let map = connect(&info, deadline, left.max(Duration::from_millis(1)))
                    .and_then(|mut con| {
                        let left = deadline.saturating_duration_since(Instant::now());
                        con.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
                        redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(&mut con)
                    })
                    .ok()
                    .and_then(|v| parse_slots(&v, &host))
                    .filter(|ranges| !ranges.is_empty());
                let _ = tx.send(map);
            });
    }
    drop(tx);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Some(map)) => return Some(map),
            Ok(None) => {}
            // Every candidate failed, or the deadline passed.
            Err(_) => return None,
        }
    }
}

/// What a node thread does with its connection: the request, `EVAL` on `NOSCRIPT`.
fn call(con: &mut redis::Connection, job: &Job, sha: &str) -> redis::RedisResult<Reply> {
    let run = |con: &mut redis::Connection, command: &str, body: &str| {
        let mut cmd = redis::cmd(command);
        cmd.arg(body)
            .arg(1)
            .arg(&job.redis_key)
            .arg(job.class.interval_us)
            .arg(job.class.burst)
            .arg(job.asked)
            .arg(u8::from(job.restart_drains));
        if job.asking {
            // ASKING and the call on one connection, in one write.
            let mut pipe = redis::pipe();
            pipe.cmd("ASKING").ignore().add_command(cmd);
            pipe.query::<(Reply,)>(con).map(|(r,)| r)
        } else {
            cmd.query::<Reply>(con)
        }
    };
    match run(con, "EVALSHA", sha) {
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            run(con, "EVAL", GCRA_LEASE)
        }
        answer => answer,
    }
}

/// Whether `e` says the connection failed (rather than the key or the slot).
fn connection_failed(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}

/// The report for one job's result.
fn report_of(key: u64, result: redis::RedisResult<Reply>) -> (Report, bool) {
    match result {
        Ok(reply) => (Report::Answer { key, reply }, false),
        Err(e) if connection_failed(&e) => (
            Report::Unserved {
                key,
                slot_only: false,
            },
            true,
        ),
        Err(e) => {
            if let Some((address, slot)) = e.redirect_node() {
                let ask = e.kind() == ErrorKind::Server(ServerErrorKind::Ask);
                return (
                    Report::Redirect {
                        key,
                        slot,
                        address: address.to_owned(),
                        ask,
                    },
                    false,
                );
            }
            if e.kind() == ErrorKind::Server(ServerErrorKind::TryAgain) {
                return (Report::TryAgain { key }, false);
            }
            let slot_unserved = matches!(
                e.kind(),
                ErrorKind::Server(
                    ServerErrorKind::ClusterDown
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::BusyLoading
                        | ServerErrorKind::ReadOnly
                        | ServerErrorKind::Moved
                        | ServerErrorKind::Ask
                )
            );
            if slot_unserved {
                (
                    Report::Unserved {
                        key,
                        slot_only: true,
                    },
                    false,
                )
            } else {
                (Report::KeyFault { key }, false)
            }
        }
    }
}

/// One node's thread: connects (at once, and again after a failure on its backoff), serves
/// its queue one request at a time, and reports each answer. Ends when the link is dropped.
fn node_thread(
    node: u8,
    info: ConnectionInfo,
    timeout: Duration,
    jobs: Receiver<Job>,
    reports: Sender<Tagged>,
    waker: Arc<OnceLock<Thread>>,
) {
    let sha = redis::Script::new(GCRA_LEASE).get_hash().to_owned();
    let send = |report: Report| {
        let gone = reports.send(Tagged { node, report }).is_err();
        if let Some(t) = waker.get() {
            t.unpark();
        }
        gone
    };
    let mut con: Option<redis::Connection> = None;
    let mut backoff = MIN_BACKOFF;
    let mut next_try = Instant::now();
    let mut up = false;
    loop {
        if con.is_none() && Instant::now() >= next_try {
            match connect_answered(&info, Instant::now() + timeout, timeout) {
                Ok(c) => {
                    con = Some(c);
                    backoff = MIN_BACKOFF;
                    if !up && send(Report::Node { node, up: true }) {
                        return;
                    }
                    up = true;
                }
                Err(_) => {
                    next_try = Instant::now() + backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    if send(Report::Node { node, up: false }) {
                        return;
                    }
                    up = false;
                }
            }
        }
        let wait = if con.is_some() {
            Duration::from_millis(100)
        } else {
            next_try
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        };
        let job = match jobs.recv_timeout(wait) {
            Ok(job) => job,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let Some(c) = con.as_mut() else {
            // Down, and not yet time to try again: unserved at once.
            if send(Report::Unserved {
                key: job.key,
                slot_only: false,
            }) {
                return;
            }
            continue;
        };
        let (report, failed) = report_of(job.key, call(c, &job, &sha));
        if send(report) {
            return;
        }
        if failed {
            // Never reused: a late reply to this call would be read as the next one's.
            con = None;
            up = false;
            next_try = Instant::now() + backoff;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            if send(Report::Node { node, up: false }) {
                return;
            }
            // Everything queued behind the failed call: unserved at once, not one timeout
            // each.
            loop {
                match jobs.try_recv() {
                    Ok(job) => {
                        if send(Report::Unserved {
                            key: job.key,
                            slot_only: false,
                        }) {
                            return;
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
        }
    }
}

/// The refresher: reads the map from the candidates it is sent, reports it.
fn refresher(
    requests: Receiver<Vec<ConnectionInfo>>,
    timeout: Duration,
    reports: Sender<Tagged>,
    waker: Arc<OnceLock<Thread>>,
) {
    while let Ok(candidates) = requests.recv() {
        let map = read_map(&candidates, timeout);
        if reports
            .send(Tagged {
                node: UNKNOWN_NODE,
                report: Report::Map(map),
            })
            .is_err()
        {
            return;
        }
        if let Some(t) = waker.get() {
            t.unpark();
        }
    }
}

impl ClusterLink {
    /// Reads the slot map from the seeds (within one `timeout`, all asked at once) and starts
    /// a thread per primary; `Err` when no seed answered.
    pub(crate) fn connect(seeds: &[ConnectionInfo], timeout: Duration) -> redis::RedisResult<Self> {
        let Some(map) = read_map(seeds, timeout) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "no seed node of the Redis Cluster answered CLUSTER SLOTS within io_timeout",
            )
            .into());
        };
        let (reports_tx, reports) = mpsc::channel();
        let (refresh, refresh_rx) = mpsc::channel();
        let waker = Arc::new(OnceLock::new());
        {
            let (tx, waker) = (reports_tx.clone(), Arc::clone(&waker));
            std::thread::Builder::new()
                .name("admit-fleet-slots".to_owned())
                .spawn(move || refresher(refresh_rx, timeout, tx, waker))
                .map_err(RedisError::from)?;
        }
        let mut link = Self {
            seeds: seeds.to_vec(),
            timeout,
            nodes: Vec::new(),
            by_address: HashMap::new(),
            owner: vec![UNKNOWN_NODE; SLOTS].into_boxed_slice(),
            slot_down: vec![false; SLOTS].into_boxed_slice(),
            published: vec![(UNKNOWN_NODE, false); SLOTS].into_boxed_slice(),
            in_flight: HashMap::new(),
            parked: Vec::new(),
            maps: 0,
            again: HashSet::new(),
            waiting: HashMap::new(),
            revived: Vec::new(),
            reports,
            reports_tx,
            refresh,
            refreshing: false,
            last_refresh: Instant::now(),
            refresh_wanted: false,
            waker,
        };
        link.apply_map(&map);
        Ok(link)
    }

    /// The thread node threads wake when they report.
    pub(crate) fn attach(&self, lease_thread: Thread) {
        let _ = self.waker.set(lease_thread);
    }

    /// The index of the node at `address`, starting its thread the first time; `None` when
    /// `MAX_NODES − 1` are known already or the address does not parse.
    fn node_at(&mut self, address: &str) -> Option<u8> {
        if let Some(&i) = self.by_address.get(address) {
            return Some(i);
        }
        let index = u8::try_from(self.nodes.len())
            .ok()
            .filter(|&i| usize::from(i) < MAX_NODES - 1)?;
        let info = at_address(self.seeds.first()?, address)?;
        let (jobs, rx) = mpsc::sync_channel(QUEUE);
        let (tx, waker, timeout) = (
            self.reports_tx.clone(),
            Arc::clone(&self.waker),
            self.timeout,
        );
        std::thread::Builder::new()
            .name("admit-fleet-node".to_owned())
            .spawn(move || node_thread(index, info, timeout, rx, tx, waker))
            .ok()?;
        self.nodes.push(Node {
            address: address.to_owned(),
            jobs,
            up: true,
            full: 0,
        });
        self.by_address.insert(address.to_owned(), index);
        Some(index)
    }

    fn apply_map(&mut self, map: &[Range]) {
        for (start, end, address) in map {
            let node = self.node_at(address).unwrap_or(UNKNOWN_NODE);
            for slot in *start..=*end {
                if let Some(o) = self.owner.get_mut(usize::from(slot)) {
                    if *o != node {
                        *o = node;
                        // A new owner: whatever the old one said of the slot is moot.
                        if let Some(d) = self.slot_down.get_mut(usize::from(slot)) {
                            *d = false;
                        }
                    }
                }
            }
        }
    }

    fn node_up(&self, node: u8) -> bool {
        self.nodes.get(usize::from(node)).is_some_and(|n| n.up)
    }

    /// Every slot whose published state differs from its current one, updated.
    fn diff(&mut self, changes: &mut Changes) {
        for slot in 0..SLOTS {
            let node = self.owner.get(slot).copied().unwrap_or(UNKNOWN_NODE);
            let down = node == UNKNOWN_NODE
                || !self.node_up(node)
                || self.slot_down.get(slot).copied().unwrap_or(false);
            if let Some(p) = self.published.get_mut(slot) {
                if *p != (node, down) {
                    *p = (node, down);
                    // `slot < SLOTS`: fits.
                    changes
                        .slots
                        .push((u16::try_from(slot).unwrap_or(0), node, down));
                }
            }
        }
    }

    /// The nodes' names so far, for the first publication.
    pub(crate) fn names(&self) -> Vec<(u8, String)> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (u8::try_from(i).unwrap_or(UNKNOWN_NODE), n.address.clone()))
            .collect()
    }

    /// Everything to publish now (after connecting: every slot).
    pub(crate) fn initial(&mut self) -> Changes {
        let mut changes = Changes {
            named: self.names(),
            ..Changes::default()
        };
        self.diff(&mut changes);
        changes
    }

    /// Hands `key`'s request to its slot's node. `Err(node)`: not sent (no node known for
    /// the slot, its queue is full, or the key's previous request is still out): the
    /// request is unserved now.
    pub(crate) fn submit(
        &mut self,
        key: u64,
        redis_key: String,
        class: ClassBudget,
        asked: u32,
        restart_drains: bool,
    ) -> Result<(), u8> {
        let slot = key_slot(redis_key.as_bytes());
        let node = self
            .owner
            .get(usize::from(slot))
            .copied()
            .unwrap_or(UNKNOWN_NODE);
        if self.in_flight.contains_key(&key) {
            return Err(node);
        }
        let flight = Flight {
            node,
            since: Instant::now(),
            job_key: redis_key,
            class,
            asked,
            restart_drains,
            slot,
            redirects: 0,
            retries: 0,
            parked: None,
        };
        self.send(key, flight, false)
    }

    fn send(&mut self, key: u64, flight: Flight, asking: bool) -> Result<(), u8> {
        let node = flight.node;
        let Some(n) = self.nodes.get_mut(usize::from(node)) else {
            return Err(node);
        };
        let job = Job {
            key,
            redis_key: flight.job_key.clone(),
            class: flight.class,
            asked: flight.asked,
            restart_drains: flight.restart_drains,
            asking,
        };
        match n.jobs.try_send(job) {
            Ok(()) => {
                self.in_flight.insert(key, flight);
                Ok(())
            }
            Err(TrySendError::Full(_)) => {
                // Unserved at once: the lease thread never waits on a node's backlog. Asked
                // again when the node answers again.
                n.full += 1;
                self.wait_for_node(key, flight.slot);
                Err(node)
            }
            Err(TrySendError::Disconnected(_)) => Err(node),
        }
    }

    /// Notes `key` (its slot `slot`) as unserved by its node, to be asked again once the
    /// node is up.
    fn wait_for_node(&mut self, key: u64, slot: u16) {
        if self.waiting.len() < QUEUE || self.waiting.contains_key(&key) {
            self.waiting.insert(key, slot);
        }
    }

    /// `key` was answered: its word no longer waits for a lost request (an answer that
    /// drained the bucket paces it instead), so it is not asked again when a node comes up.
    fn answered(&mut self, key: u64) {
        if !self.waiting.is_empty() {
            self.waiting.remove(&key);
        }
    }

    /// Moves to `revived` every waiting key whose slot's owner is up and serving it now.
    fn revive(&mut self) {
        if self.waiting.is_empty() {
            return;
        }
        let mut waiting = std::mem::take(&mut self.waiting);
        let mut revived = std::mem::take(&mut self.revived);
        let served = |slot: u16| {
            let node = self
                .owner
                .get(usize::from(slot))
                .copied()
                .unwrap_or(UNKNOWN_NODE);
            node != UNKNOWN_NODE
                && self.node_up(node)
                && !self
                    .slot_down
                    .get(usize::from(slot))
                    .copied()
                    .unwrap_or(true)
        };
        waiting.retain(|&key, &mut slot| {
            let now = served(slot);
            if now {
                revived.push(key);
            }
            !now
        });
        self.waiting = waiting;
        self.revived = revived;
    }

    /// The keys whose node came up since the last call: each was unserved while its node
    /// was down (or its queue full) and asks again now, if its word still waits for that
    /// request (the caller checks) and it has none out.
    pub(crate) fn take_revived(&mut self) -> Vec<u64> {
        let revived = std::mem::take(&mut self.revived);
        revived
            .into_iter()
            .filter(|key| !self.in_flight.contains_key(key))
            .collect()
    }

    /// Requests that found each node's queue full since the last call: `(node, count)`.
    pub(crate) fn take_queue_full(&mut self) -> impl Iterator<Item = (u8, u64)> + '_ {
        self.nodes.iter_mut().enumerate().filter_map(|(i, n)| {
            let full = std::mem::take(&mut n.full);
            (full > 0).then(|| (u8::try_from(i).unwrap_or(UNKNOWN_NODE), full))
        })
    }

    /// Takes every report in; returns the finished requests and what to publish.
    pub(crate) fn poll(&mut self, finished: &mut Vec<Finished>) -> Changes {
        let mut changes = Changes::default();
        let mut map_changed = false;
        let mut revive = false;
        let named_before = self.nodes.len();
        while let Ok(Tagged { node, report }) = self.reports.try_recv() {
            match report {
                Report::Node { node, up } => {
                    if let Some(n) = self.nodes.get_mut(usize::from(node)) {
                        if n.up != up {
                            n.up = up;
                            changes.nodes.push((node, up));
                            map_changed = true;
                        }
                    }
                    if up {
                        revive = true;
                    } else {
                        self.refresh_wanted = true;
                    }
                }
                Report::Map(map) => {
                    self.refreshing = false;
                    if let Some(map) = map {
                        self.apply_map(&map);
                        self.maps += 1;
                        map_changed = true;
                        // A failover's promoted replica may serve them now.
                        revive = true;
                    }
                }
                Report::TryAgain { key } => {
                    if let Some(f) = self.in_flight.remove(&key) {
                        let slot = f.slot;
                        if let Err(f) = self.park(key, f) {
                            map_changed |=
                                self.unserved(key, (f.since, f.asked), slot, node, finished);
                        }
                    }
                }
                Report::Answer { key, reply } => {
                    self.answered(key);
                    if let Some(f) = self.in_flight.remove(&key) {
                        if let Some(d) = self.slot_down.get_mut(usize::from(f.slot)) {
                            if *d {
                                *d = false;
                                map_changed = true;
                            }
                        }
                        finished.push(Finished {
                            key,
                            asked: f.asked,
                            node,
                            took: f.since.elapsed(),
                            outcome: Outcome::Answer(reply),
                        });
                    }
                }
                Report::KeyFault { key } => {
                    self.answered(key);
                    if let Some(f) = self.in_flight.remove(&key) {
                        finished.push(Finished {
                            key,
                            asked: f.asked,
                            node,
                            took: f.since.elapsed(),
                            outcome: Outcome::KeyFault,
                        });
                    }
                }
                Report::Unserved { key, slot_only } => {
                    if let Some(f) = self.in_flight.remove(&key) {
                        if slot_only {
                            if let Some(d) = self.slot_down.get_mut(usize::from(f.slot)) {
                                *d = true;
                            }
                            map_changed = true;
                            self.refresh_wanted = true;
                        } else {
                            self.wait_for_node(key, f.slot);
                        }
                        finished.push(Finished {
                            key,
                            asked: f.asked,
                            node,
                            took: f.since.elapsed(),
                            outcome: Outcome::Unserved,
                        });
                    }
                }
                Report::Redirect {
                    key,
                    slot,
                    address,
                    ask,
                } => {
                    let Some(mut f) = self.in_flight.remove(&key) else {
                        continue;
                    };
                    let target = self.node_at(&address);
                    if !ask {
                        self.refresh_wanted = true;
                        if let (Some(t), Some(o)) = (target, self.owner.get_mut(usize::from(slot)))
                        {
                            *o = t;
                            map_changed = true;
                        }
                    }
                    let sent = match target {
                        Some(t) if f.redirects < REDIRECTS => {
                            f.redirects += 1;
                            f.node = t;
                            let since = f.since;
                            let asked = f.asked;
                            self.send(key, f, ask).map_err(|_| (since, asked))
                        }
                        // The chain ran out: sent again once the map caught up.
                        Some(_) => match self.park(key, f) {
                            Ok(()) => Ok(()),
                            Err(f) => Err((f.since, f.asked)),
                        },
                        None => Err((f.since, f.asked)),
                    };
                    if let Err(spent) = sent {
                        map_changed |= self.unserved(key, spent, slot, node, finished);
                    }
                }
            }
        }
        map_changed |= self.retry_parked(finished);
        if revive {
            self.revive();
        }
        // Nodes first named by a map or a redirect.
        changes.named = self.names().into_iter().skip(named_before).collect();
        if map_changed {
            self.diff(&mut changes);
        }
        self.maybe_refresh();
        changes
    }

    /// Asks the refresher for a map when one is wanted (after a `MOVED`, a slot unserved)
    /// or while a node is down, at most every `REFRESH_MIN_GAP` (`REFRESH_WHILE_DOWN` for the
    /// latter).
    fn maybe_refresh(&mut self) {
        if self.refreshing {
            return;
        }
        let since = self.last_refresh.elapsed();
        let any_down = self.nodes.iter().any(|n| !n.up);
        let due = (self.refresh_wanted && since >= REFRESH_MIN_GAP)
            || (any_down && since >= REFRESH_WHILE_DOWN);
        if !due {
            return;
        }
        // Live nodes first, then the seeds: all asked at once.
        let mut candidates: Vec<ConnectionInfo> = Vec::new();
        if let Some(seed) = self.seeds.first() {
            for n in self.nodes.iter().filter(|n| n.up) {
                if let Some(info) = at_address(seed, &n.address) {
                    candidates.push(info);
                }
            }
        }
        for seed in &self.seeds {
            let known = address_of(seed)
                .is_some_and(|a| self.by_address.get(&a).is_some_and(|&i| self.node_up(i)));
            if !known {
                candidates.push(seed.clone());
            }
        }
        if self.refresh.send(candidates).is_ok() {
            self.refreshing = true;
            self.refresh_wanted = false;
            self.last_refresh = Instant::now();
        }
    }

    /// Sets `flight` aside to be sent again (`Err`: its retries are spent). A map is asked
    /// for.
    fn park(&mut self, key: u64, mut flight: Flight) -> Result<(), Flight> {
        if flight.retries >= RETRIES {
            return Err(flight);
        }
        flight.retries += 1;
        flight.parked = Some((Instant::now() + RETRY_AFTER, self.maps));
        self.refresh_wanted = true;
        self.in_flight.insert(key, flight);
        self.parked.push(key);
        Ok(())
    }

    /// `key`'s request is finished unserved, its slot down; returns `true` (the map changed).
    fn unserved(
        &mut self,
        key: u64,
        (since, asked): (Instant, u32),
        slot: u16,
        node: u8,
        finished: &mut Vec<Finished>,
    ) -> bool {
        if let Some(d) = self.slot_down.get_mut(usize::from(slot)) {
            *d = true;
        }
        self.refresh_wanted = true;
        finished.push(Finished {
            key,
            asked,
            node,
            took: since.elapsed(),
            outcome: Outcome::Unserved,
        });
        true
    }

    /// Sends again the parked flights whose time came or that a newer map may serve, each to
    /// its slot's owner now, with its redirects counted afresh; returns whether a slot went
    /// down (a flight could not be sent).
    fn retry_parked(&mut self, finished: &mut Vec<Finished>) -> bool {
        if self.parked.is_empty() {
            return false;
        }
        let now = Instant::now();
        let mut map_changed = false;
        let keys = std::mem::take(&mut self.parked);
        for key in keys {
            let due = self
                .in_flight
                .get(&key)
                .and_then(|f| f.parked)
                .map(|(at, maps)| now >= at || self.maps > maps);
            match due {
                Some(true) => {}
                Some(false) => {
                    self.parked.push(key);
                    continue;
                }
                // Not parked (any more): nothing to do.
                None => continue,
            }
            let Some(mut f) = self.in_flight.remove(&key) else {
                continue;
            };
            let slot = f.slot;
            f.parked = None;
            f.redirects = 0;
            f.node = self
                .owner
                .get(usize::from(slot))
                .copied()
                .unwrap_or(UNKNOWN_NODE);
            let (node, since, asked) = (f.node, f.since, f.asked);
            if self.send(key, f, false).is_err() {
                map_changed |= self.unserved(key, (since, asked), slot, node, finished);
            }
        }
        map_changed
    }

    /// Whether `key`'s previous request is still out at a node.
    pub(crate) fn in_flight(&self, key: u64) -> bool {
        self.in_flight.contains_key(&key)
    }

    /// `key` was taken off the ring while its previous request is out: noted, to be asked
    /// again as soon as that request comes back unserved.
    pub(crate) fn ask_again(&mut self, key: u64) {
        if self.in_flight.contains_key(&key) {
            self.again.insert(key);
        }
    }

    /// Whether `key`, whose request just finished, was taken off the ring meanwhile (and is
    /// no longer noted).
    pub(crate) fn take_again(&mut self, key: u64) -> bool {
        self.again.remove(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slots_reply_parses_and_an_empty_host_is_the_queried_one() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("", 7001),
                node("10.0.0.9", 7009),
            ]),
        ]);
        let map = parse_slots(&reply, "10.0.0.2");
        assert_eq!(
            map,
            Some(vec![
                (0, 5460, "10.0.0.1:7000".to_owned()),
                (5461, 16383, "10.0.0.2:7001".to_owned()),
            ])
        );
        assert_eq!(parse_slots(&Value::Int(3), "h"), None);
        let out_of_range = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(16384),
            node("h", 1),
        ])]);
        assert_eq!(parse_slots(&out_of_range, "h"), None);
    }

    /// A seed that accepts and never answers (a paused node) costs one timeout in all, not
    /// one per seed.
    #[test]
    fn hung_seeds_cost_one_timeout_in_all() {
        let hung: Vec<_> = (0..3)
            .filter_map(|_| std::net::TcpListener::bind("127.0.0.1:0").ok())
            .collect();
        let seeds: Vec<ConnectionInfo> = hung
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .filter_map(|a| {
                redis::IntoConnectionInfo::into_connection_info(format!("redis://{a}")).ok()
            })
            .collect();
        assert_eq!(seeds.len(), 3);
        let started = Instant::now();
        assert!(read_map(&seeds, Duration::from_millis(100)).is_none());
        let took = started.elapsed();
        assert!(took < Duration::from_millis(180), "{took:?}");
    }
}
