//! An attacker rotating fresh addresses inside its prefixes (one IPv6 /48, or P of them)
//! while honest newcomers arrive, each from a /32 of its own: with a per-address limit only,
//! and with a /48 limit charged first. Without it the rotation fills the per-address table
//! with drained entries, and every newcomer lands on the class's shared overflow bucket, which
//! the flood keeps empty: refused. With it, each attacker prefix holds at most
//! `b_p + r_p·D_a` address entries, and while `P × that + the honest set ≤ the address cap`
//! every newcomer is admitted on an entry of its own.
//!
//! Time is a `ManualClock` moved one step per attacker request, so the run lasts exactly D
//! and every bound below is computed from it. Addresses are keyed by their /64 (as
//! `tower::PeerIp` keys them), prefixes by `admit::IpPrefix`'s /48.

use crate::progress::Phase;
use crate::quota::SourceLimit;
use crate::report::{Cell, Table};
use admit::gate::{Admission, Gate, KeyKind, Limit};
use admit::{HashedActor, IpPrefix, Limiter, ManualClock};
use std::collections::HashSet;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

pub const HEADING: &str =
    "prefix: an attacker rotating addresses inside its /48s, honest newcomers beside it";

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    /// D, the flood's length.
    pub run: Duration,
    /// Attacker requests a second, over all its prefixes, each from a fresh /64.
    pub attack_per_sec: u32,
    /// P of the "P /48s" columns.
    pub prefixes: u32,
    /// Honest newcomers a second, each from a /32 (and so a /48) of its own.
    pub newcomers_per_sec: u32,
    /// Requests each newcomer makes, one a step.
    pub newcomer_requests: u32,
    /// The limit per address (its /64).
    pub per_address: SourceLimit,
    /// The limit per /48.
    pub per_prefix: SourceLimit,
    /// The per-address limiter's cap.
    pub address_cap: usize,
    /// The prefix limiter's cap.
    pub prefix_cap: usize,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            run: Duration::from_secs(5),
            attack_per_sec: 100_000,
            prefixes: 32,
            newcomers_per_sec: 100,
            newcomer_requests: 5,
            per_address: SourceLimit {
                per_second: 10,
                burst: 10,
            },
            per_prefix: SourceLimit {
                per_second: 20,
                burst: 40,
            },
            address_cap: admit::DEFAULT_CAP,
            prefix_cap: admit::DEFAULT_CAP,
        }
    }
}

impl Params {
    /// D_a: the longest a per-address entry drains, its refill span b_a / r_a.
    pub fn address_span(&self) -> Duration {
        Duration::from_secs_f64(
            f64::from(self.per_address.burst) / f64::from(self.per_address.per_second.max(1)),
        )
    }

    /// b_p + r_p·D_a: the most address entries one prefix holds at once.
    pub fn entries_per_prefix(&self) -> u64 {
        self.per_prefix.admits_over(self.address_span())
    }

    /// H_a: the honest addresses active within D_a (each newcomer's requests take a few
    /// steps, then its entry drains for at most D_a), rounded up.
    pub fn honest_active(&self) -> u64 {
        let span =
            self.address_span().as_secs_f64() + self.newcomer_steps() as f64 * self.step_secs();
        (f64::from(self.newcomers_per_sec) * span).ceil() as u64 + 1
    }

    /// H_p: the honest prefixes active within the prefix limit's refill span b_p / r_p.
    pub fn honest_prefixes_active(&self) -> u64 {
        let span = f64::from(self.per_prefix.burst) / f64::from(self.per_prefix.per_second.max(1))
            + self.newcomer_steps() as f64 * self.step_secs();
        (f64::from(self.newcomers_per_sec) * span).ceil() as u64 + 1
    }

    /// P × (b_p + r_p·D_a) + H_a: what the address table must hold.
    pub fn address_need(&self, prefixes: u32) -> u64 {
        u64::from(prefixes) * self.entries_per_prefix() + self.honest_active()
    }

    fn step_secs(&self) -> f64 {
        1.0 / f64::from(self.attack_per_sec.max(1))
    }

    fn step_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.attack_per_sec.max(1))
    }

    fn steps(&self) -> u64 {
        u64::try_from(self.run.as_nanos() / u128::from(self.step_ns().max(1))).unwrap_or(u64::MAX)
    }

    fn newcomer_steps(&self) -> u64 {
        u64::from(self.newcomer_requests)
    }

    /// Steps between two newcomers.
    fn newcomer_every(&self) -> u64 {
        (u64::from(self.attack_per_sec) / u64::from(self.newcomers_per_sec.max(1))).max(1)
    }
}

/// One column's result.
#[derive(Debug, Clone)]
pub struct Run {
    pub label: String,
    pub prefixes: u32,
    /// The prefix limit's IPv6 length (48, or 32), if the column has one.
    pub prefix_limit: Option<u8>,
    pub attacker_sent: u64,
    pub attacker_admitted: u64,
    pub newcomers: u64,
    pub newcomer_refused: u64,
    pub newcomers_refused: u64,
    /// Newcomer requests a limit's shared overflow bucket decided (the address table's, or
    /// the prefix table's).
    pub newcomer_overflow: u64,
    pub memory: usize,
}

/// The /48s of a rented IPv6 /32.
pub const RENTED: u32 = 65_536;

impl Run {
    /// P as the prefix limit counts it: a rented /32's /48s are one /32.
    pub fn charged_prefixes(&self, ipv6_bits: u8) -> u32 {
        if ipv6_bits <= 32 {
            1
        } else {
            self.prefixes
        }
    }
}

/// Every column: P = 1 and P = `prefixes` without and with the /48 limit, then a rented /32
/// (65,536 /48s) with the /48 limit, and with a /32 limit instead.
pub fn run(params: &Params) -> Result<Vec<Run>, String> {
    let p = params.prefixes;
    let variants = [
        ("per-address only, 1 /48".to_string(), 1, None),
        ("+ /48 limit first, 1 /48".to_string(), 1, Some(48)),
        (format!("per-address only, {p} /48s"), p, None),
        (format!("+ /48 limit first, {p} /48s"), p, Some(48)),
        (
            "+ /48 limit first, a rented /32".to_string(),
            RENTED,
            Some(48),
        ),
        (
            "+ /32 limit first, a rented /32".to_string(),
            RENTED,
            Some(32),
        ),
    ];
    variants
        .into_iter()
        .map(|(label, prefixes, prefix_limit)| once(params, label, prefixes, prefix_limit))
        .collect()
}

/// The `n`-th /64 the attacker takes inside its prefix `p` (a /48 holds 65,536 of them: it
/// cycles, long after each one's entry has drained).
fn attacker(p: u32, n: u64) -> IpAddr {
    let p = u16::try_from(p % 65_536).unwrap_or(0);
    let n = u16::try_from(n % 65_536).unwrap_or(0);
    IpAddr::V6(Ipv6Addr::new(0x2a0b, 0xbad, p, n, 0, 0, 0, 0))
}

/// Newcomer `i`'s /64, in a /32 (and so a /48) of its own.
fn newcomer(i: u64) -> IpAddr {
    let hi = u16::try_from((i >> 16) % 4_096).unwrap_or(0);
    let lo = u16::try_from(i % 65_536).unwrap_or(0);
    IpAddr::V6(Ipv6Addr::new(0x3000 + hi, lo, 0, 0, 0, 0, 0, 0))
}

fn limiter(
    limit: SourceLimit,
    cap: usize,
    clock: &ManualClock,
) -> Result<Limiter<ManualClock>, String> {
    Limiter::builder()
        .cap(cap)
        .build_with_clock([limit.config()?], clock.clone())
        .map_err(|e| format!("limiter (cap {cap}): {e}"))
}

fn once(
    params: &Params,
    label: String,
    prefixes: u32,
    prefix_limit: Option<u8>,
) -> Result<Run, String> {
    let phase = Phase::start(&format!("prefix: {label}"));
    let clock = ManualClock::new();
    let per_address = limiter(params.per_address, params.address_cap, &clock)?;
    let mut memory = per_address.memory_bytes();
    let mut gate = Gate::new();
    let prefix = match prefix_limit {
        Some(bits) => {
            let per_prefix = limiter(params.per_prefix, params.prefix_cap, &clock)?;
            memory += per_prefix.memory_bytes();
            gate = gate
                .rates(
                    per_prefix,
                    [Limit::new("per prefix", 0).keyed_by(KeyKind::SourcePrefix)],
                )
                .map_err(|e| e.to_string())?;
            Some(IpPrefix::new(IpPrefix::DEFAULT_IPV4, bits).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let gate = gate
        .rates(per_address, [Limit::new("per address", 0)])
        .map_err(|e| e.to_string())?;
    // Charges any limit's shared overflow bucket paid (each limiter has one class).
    let overflow = || -> u64 {
        gate.limits()
            .filter_map(|(limiter, _)| limiter.overflow_charges(0))
            .sum()
    };
    let admission = |ip: IpAddr| {
        let address = Admission::hashed_one(HashedActor::new(&ip));
        match prefix {
            Some(prefix) => address.source_prefix(prefix.hashed(ip)),
            None => address,
        }
    };
    let mut run = Run {
        label,
        prefixes,
        prefix_limit,
        attacker_sent: 0,
        attacker_admitted: 0,
        newcomers: 0,
        newcomer_refused: 0,
        newcomers_refused: 0,
        newcomer_overflow: 0,
        memory,
    };
    let step = params.step_ns();
    let every = params.newcomer_every();
    let warm_up = params.steps() / 10;
    let prefixes = u64::from(prefixes.max(1));
    // Newcomers still making requests: (who, requests left).
    let mut arriving: Vec<(u64, u32)> = Vec::new();
    let mut refused: HashSet<u64> = HashSet::new();
    for i in 0..params.steps() {
        let now = clock.advance_ns(step);
        let p = u32::try_from(i % prefixes).unwrap_or(0);
        run.attacker_sent += 1;
        if gate
            .try_admit_at(&admission(attacker(p, i / prefixes)), now)
            .is_ok()
        {
            run.attacker_admitted += 1;
        }
        // Newcomers arrive once the flood has filled what it can (after D/10).
        if i >= warm_up && i % every == 0 {
            arriving.push((run.newcomers, params.newcomer_requests));
            run.newcomers += 1;
        }
        for (who, left) in &mut arriving {
            let before = overflow();
            if gate.try_admit_at(&admission(newcomer(*who)), now).is_err() {
                run.newcomer_refused += 1;
                refused.insert(*who);
            }
            run.newcomer_overflow += overflow().saturating_sub(before);
            *left -= 1;
        }
        arriving.retain(|(_, left)| *left > 0);
    }
    run.newcomers_refused = refused.len() as u64;
    phase.finish();
    Ok(run)
}

pub fn table(params: &Params, runs: &[Run]) -> Table {
    let mut t = Table::new(
        "prefix",
        HEADING,
        runs.iter().map(|r| r.label.clone()).collect(),
    );
    let each = |f: &dyn Fn(&Run) -> Cell| runs.iter().map(f).collect::<Vec<_>>();
    let d = params.run;
    t.row(
        "attacker /48s",
        "attacker_prefixes",
        each(&|r| Cell::Count(u64::from(r.prefixes))),
    );
    t.row(
        "attacker requests sent (a fresh /64 each)",
        "attacker_sent",
        each(&|r| Cell::Count(r.attacker_sent)),
    );
    t.row(
        "attacker requests admitted",
        "attacker_admitted",
        each(&|r| Cell::Count(r.attacker_admitted)),
    );
    t.row(
        "  bound: P x (b_p + r_p·D)",
        "attacker_bound",
        each(&|r| {
            if let Some(bits) = r.prefix_limit {
                Cell::Count(u64::from(r.charged_prefixes(bits)) * params.per_prefix.admits_over(d))
            } else {
                Cell::Text("none".into())
            }
        }),
    );
    t.row(
        "honest newcomers (a /32 each)",
        "newcomers",
        each(&|r| Cell::Count(r.newcomers)),
    );
    t.row(
        "  newcomers refused at least once",
        "newcomers_refused",
        each(&|r| Cell::Count(r.newcomers_refused)),
    );
    t.row(
        "  newcomer requests refused",
        "newcomer_requests_refused",
        each(&|r| Cell::Count(r.newcomer_refused)),
    );
    t.row(
        "  newcomer requests paid by a shared overflow",
        "newcomer_requests_overflow",
        each(&|r| Cell::Count(r.newcomer_overflow)),
    );
    // Whether a table holds what is alive in it: "yes (need <= cap)", or "-" without a
    // prefix limit.
    let holds = |r: &Run, need: &dyn Fn(u32) -> u64, cap: usize| match r.prefix_limit {
        Some(bits) => {
            let need = need(r.charged_prefixes(bits));
            let (word, sign) = if need <= cap as u64 {
                ("yes", "<=")
            } else {
                ("no", ">")
            };
            Cell::Text(format!("{word} ({need} {sign} {cap})"))
        }
        None => Cell::Text("-".into()),
    };
    t.row(
        "address table: P x (b_p + r_p·D_a) + H_a <= cap",
        "address_table_holds",
        each(&|r| holds(r, &|p| params.address_need(p), params.address_cap)),
    );
    t.row(
        "prefix table: P + H_p <= cap",
        "prefix_table_holds",
        each(&|r| {
            let need = |p| u64::from(p) + params.honest_prefixes_active();
            holds(r, &need, params.prefix_cap)
        }),
    );
    t.row(
        "limiter memory",
        "limiter_memory_bytes",
        each(&|r| Cell::Bytes(r.memory as u64)),
    );
    t.note(format!(
        "the attacker sends {} requests/s for D = {:.1} s, each from a fresh /64 of its /48s in \
         turn; from D/10 on, {} newcomers/s arrive, each from a /32 of its own, making {} \
         requests",
        params.attack_per_sec,
        d.as_secs_f64(),
        params.newcomers_per_sec,
        params.newcomer_requests
    ));
    t.note(format!(
        "per address (its /64): {}, cap {}; per /48, charged first: {}, cap {}. An address \
         entry drains for at most D_a = b_a / r_a = {:.1} s, so one /48 holds at most b_p + \
         r_p·D_a = {} entries, and H_a = {} newcomers are active within D_a",
        params.per_address,
        params.address_cap,
        params.per_prefix,
        params.prefix_cap,
        params.address_span().as_secs_f64(),
        params.entries_per_prefix(),
        params.honest_active()
    ));
    t.note(
        "without the /48 limit the fresh addresses fill the address table with drained \
         entries, and newcomers pay the shared overflow bucket the flood keeps empty; with it, \
         newcomers keep entries of their own while both tables hold what is alive (P + the \
         honest prefixes <= the prefix cap too). A rented /32 is 65,536 /48s, each under its \
         /48 budget: neither table holds them. Keyed by /32 (IpPrefix::new(24, 32)) it is one \
         prefix, at the price of every client of one /32 sharing its budget (here each \
         newcomer has a /32 of its own)",
    );
    t
}
