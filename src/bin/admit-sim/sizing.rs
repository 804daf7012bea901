//! Scenario 4: given a fleet's bring-up wave, does the admission burst cover it, and if not,
//! how much longer does the wave take? Then the wave is run through the limiter to show it,
//! on a manual clock whose callers honour every `retry_after`.

use crate::progress::Phase;
use crate::registrar::RegistrarVerb;
use crate::report::{Cell, Table};
use admit::registrar::{size_wave, NoopSink, RegistrarConfig, RegistrarLimiter};
use admit::ManualClock;
use std::time::Duration;

pub const HEADING: &str = "sizing: does the admission burst cover your bring-up wave?";

/// What to size.
#[derive(Debug, Clone)]
pub struct Params {
    pub wave_hosts: u32,
    pub modules_per_host: u32,
    /// The operator's numbers, compared with the defaults when given.
    pub config: Option<RegistrarConfig>,
}

/// One column: the arithmetic and the replayed wave.
#[derive(Debug, Clone)]
pub struct Run {
    pub label: String,
    pub burst: u32,
    pub interval_ms: u32,
    pub mints: u64,
    pub covered: bool,
    pub extra_secs: u64,
    /// `None` when the wave is too large to replay in reasonable time.
    pub replay: Option<(Duration, u64)>,
}

/// Waves above this many mints are sized but not replayed.
const MAX_REPLAY_MINTS: u64 = 10_000_000;

pub fn run(params: &Params) -> Result<Vec<Run>, String> {
    let mut variants = vec![("admit defaults".to_string(), RegistrarConfig::default())];
    if let Some(config) = params.config.filter(|c| *c != RegistrarConfig::default()) {
        variants.push(("your numbers".into(), config));
    }
    variants
        .into_iter()
        .map(|(label, config)| {
            let phase = Phase::start(&format!("sizing: {label}"));
            let run = size_one(params, label, config);
            phase.finish();
            run
        })
        .collect()
}

fn size_one(params: &Params, label: String, config: RegistrarConfig) -> Result<Run, String> {
    let sizing = size_wave(&config, params.wave_hosts, params.modules_per_host);
    let replay = if sizing.mints() <= MAX_REPLAY_MINTS {
        Some(replay(config, sizing.mints())?)
    } else {
        None
    };
    Ok(Run {
        label,
        burst: config.rate_limit_admission_burst,
        interval_ms: config.rate_limit_admission_refill_interval_ms,
        mints: sizing.mints(),
        covered: sizing.covered(),
        extra_secs: sizing.extra_secs(),
        replay,
    })
}

/// Runs `mints` through the admission check point; returns the simulated time the wave took
/// and how many throttles its caller answered.
fn replay(config: RegistrarConfig, mints: u64) -> Result<(Duration, u64), String> {
    let clock = ManualClock::new();
    let limiter = RegistrarLimiter::<RegistrarVerb>::builder(config)
        .build_with_clock(NoopSink, clock.clone())
        .map_err(|e| e.to_string())?;
    // Every host's modules mint at once, from the control plane's one identity; a throttled
    // mint waits exactly its retry_after (no jitter, one caller) and tries again.
    let mut throttles = 0u64;
    let mut minted = 0u64;
    while minted < mints {
        match limiter.enter_admission(b"uid:0", RegistrarVerb::Mint) {
            Ok(_) => minted += 1,
            Err(throttled) => {
                throttles += 1;
                clock.advance(throttled.retry_after().as_duration());
            }
        }
    }
    Ok((
        Duration::from_nanos(admit::Clock::now_ns(&clock)),
        throttles,
    ))
}

pub fn table(params: &Params, runs: &[Run]) -> Table {
    let mut t = Table::new(
        "sizing",
        HEADING,
        runs.iter().map(|r| r.label.clone()).collect(),
    );
    let each = |f: &dyn Fn(&Run) -> Cell| runs.iter().map(f).collect::<Vec<_>>();
    t.row(
        "mints in the wave",
        "wave_mints",
        each(&|r| Cell::Count(r.mints)),
    );
    t.row(
        "rate_limit_admission_burst",
        "admission_burst",
        each(&|r| Cell::Count(u64::from(r.burst))),
    );
    t.row(
        "rate_limit_admission_refill_interval_ms",
        "admission_refill_interval_ms",
        each(&|r| Cell::Count(u64::from(r.interval_ms))),
    );
    t.row(
        "burst covers the wave",
        "covered",
        each(&|r| Cell::Text(if r.covered { "yes".into() } else { "no".into() })),
    );
    t.row(
        "extra seconds, (mints - burst) x interval",
        "extra_secs",
        each(&|r| Cell::Count(r.extra_secs)),
    );
    let not_replayed = || Cell::Text("not replayed".into());
    t.row(
        "replayed: wave finished after",
        "replay_elapsed_us",
        each(&|r| r.replay.map_or_else(not_replayed, |(d, _)| Cell::Time(d))),
    );
    t.row(
        "replayed: throttles answered",
        "replay_throttles",
        each(&|r| r.replay.map_or_else(not_replayed, |(_, n)| Cell::Count(n))),
    );
    t.note(format!(
        "wave: {} hosts x {} modules; set rate_limit_admission_burst >= {} for the wave to pass \
         without waiting",
        params.wave_hosts,
        params.modules_per_host,
        u64::from(params.wave_hosts) * u64::from(params.modules_per_host)
    ));
    t
}
