//! The command line: every flag explained in `--help`, every bad value a one-line error.

use crate::{fairness, fleet, prefix, quota, registrar, sizing};
use admit::live::LimitsConfig;
use admit::registrar::{RateLimitKey, RegistrarConfig};
use clap::error::ErrorKind;
use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Run admit's defences against real floods, side by side with no defence.
///
/// With no scenario, runs fairness, registrar, quota and prefix with their defaults (under 30 s on
/// two cores) and prints one summary table each.
#[derive(Debug, Parser)]
#[command(name = "admit-sim", version, allow_negative_numbers = true)]
pub struct Cli {
    /// Scenarios to run, in order (default: fairness registrar quota prefix).
    #[arg(value_enum)]
    pub scenario: Vec<Scenario>,

    /// Print the results as JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,

    /// Draw the human's wait distribution (fairness, or adaptive's steady phases) as an SVG
    /// file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,

    /// fairness: your quota, run beside the default (ops awaiting a decision per actor).
    #[arg(long, value_name = "Q", value_parser = clap::value_parser!(u32).range(1..))]
    pub quota: Option<u32>,

    /// fairness: the writer's cost to apply one op, in microseconds.
    #[arg(long, value_name = "US", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub apply_us: u64,

    /// fairness: how many ops the human submits.
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub human_ops: u64,

    /// fairness: microseconds between the human's ops.
    #[arg(long, value_name = "US", default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub human_interval_us: u64,

    /// fairness: ops the agent keeps queued when nothing stops it.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub agent_backlog: u64,

    /// registrar, sizing: hosts brought up at once.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub wave_hosts: u32,

    /// registrar, sizing: components per host.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub modules_per_host: u32,

    /// registrar: malformed invocations flooded from one identity.
    #[arg(long, value_name = "N", default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub flood: u64,

    /// registrar: distinct identities, one malformed invocation each.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub churn: u64,

    /// quota: legitimate but abusive sessions flooding valid writes.
    #[arg(long, value_name = "N", default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub abusive: u32,

    /// quota: writes each abusive session attempts.
    #[arg(long, value_name = "N", default_value_t = 3_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub abusive_writes: u32,

    /// quota: honest actors, each writing a little.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub honest: u32,

    /// quota: writes each honest actor makes.
    #[arg(long, value_name = "N", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub honest_writes: u32,

    /// quota: names a rotating attacker uses, one write each.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
    pub rotating: u32,

    /// prefix: the attacker's requests a second, each from a fresh /64 of its /48s.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub prefix_attack: u32,

    /// prefix: the attacker's /48s in the "P /48s" columns (P).
    #[arg(long, value_name = "P", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub prefixes: u32,

    /// prefix: seconds the attacker floods.
    #[arg(long, value_name = "S", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub prefix_secs: u64,

    /// fleet: seconds each side floods.
    #[arg(long, value_name = "S", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub fleet_secs: u64,

    /// fleet: the identity's fleet-wide budget, tokens per second.
    #[arg(long, value_name = "N", default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub fleet_rate: u32,

    /// fleet: the identity's burst.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub fleet_burst: u32,

    /// fleet: the most tokens one door leases at a time (the bound's slack is 4 × this).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=524_288))]
    pub lease_cap: u32,

    /// fleet: share the budget through a local Redis Cluster (3 primaries + 3 replicas,
    /// started and stopped here; needs redis-server and redis-cli) rather than one server.
    #[arg(long)]
    pub cluster: bool,

    /// fleet --cluster: after the floods, a flood over twelve identities on all three
    /// primaries, once without a fault and once with one primary killed (SIGKILL) or paused
    /// (SIGSTOP for 1 s, under the node timeout, then SIGCONT) mid-run; prints each primary's
    /// fail-policy decisions, lease p99 and tokens leased per second in both runs.
    #[arg(long, value_enum, value_name = "FAULT", requires = "cluster")]
    pub fault: Option<fleet::Fault>,

    /// A TOML file of your limits: [registrar] holds the registrar's rate_limit_* keys (registrar,
    /// sizing), [admit.in_flight] your quota (fairness), [admit.volume] your volume quota
    /// (quota); every key of [admit] is checked (see docs/admit.example.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// registrar, sizing: admission tokens per identity and verb (overrides --config).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_admission_burst: Option<u32>,

    /// registrar, sizing: milliseconds per admission token (overrides --config).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_admission_refill_interval_ms: Option<u32>,

    /// registrar, sizing: pre-derivation refusal tokens per identity and verb (overrides --config).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_predecision_refusal_burst: Option<u32>,

    /// registrar, sizing: milliseconds per pre-derivation refusal token (overrides --config).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_predecision_refusal_refill_interval_ms: Option<u32>,
}

/// A scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Seed 000: a human and a flooding agent in front of one writer.
    Fairness,
    /// Seed 001: malformed floods and identity churn beside a legitimate bring-up wave.
    Registrar,
    /// Seed 002: abusive sessions, honest actors and a name-rotating attacker writing.
    Quota,
    /// An attacker rotating addresses inside its /48s beside honest newcomers, with and
    /// without a /48 limit.
    Prefix,
    /// A writer slowing 10x and back, then stalling, under 1,000 honest actors and a human:
    /// the adaptive total beside none and static caps (simulated time).
    Adaptive,
    /// Whether your admission burst covers your bring-up wave, replayed through the limiter.
    Sizing,
    /// One identity flooding 4 front doors: per-door limits vs one budget shared on Redis.
    Fleet,
}

impl Cli {
    /// The scenarios to run, defaulting to all of them.
    pub fn scenarios(&self) -> Vec<Scenario> {
        if self.scenario.is_empty() {
            vec![
                Scenario::Fairness,
                Scenario::Registrar,
                Scenario::Quota,
                Scenario::Prefix,
            ]
        } else {
            self.scenario.clone()
        }
    }

    /// Checks what clap cannot: combinations of flags.
    pub fn validate(&self) -> Result<(), String> {
        let drawn = [Scenario::Fairness, Scenario::Adaptive]
            .iter()
            .filter(|s| self.scenarios().contains(s))
            .count();
        if self.svg.is_some() && drawn != 1 {
            return Err(
                "--svg draws the human's waits of one scenario: give `fairness` or `adaptive`"
                    .into(),
            );
        }
        Ok(())
    }

    /// The operator's registrar numbers, if any were given: `--config` first, then each
    /// `--rate-limit-*` flag over it. Every problem names the key or the flag.
    pub fn registrar_config(&self) -> Result<Option<RegistrarConfig>, String> {
        let mut config = match &self.config {
            Some(path) => Some(
                RegistrarConfig::load(path)
                    .map_err(|e| format!("--config {}: {e}", path.display()))?
                    .config,
            ),
            None => None,
        };
        let flags = [
            (
                RateLimitKey::AdmissionBurst,
                self.rate_limit_admission_burst,
            ),
            (
                RateLimitKey::AdmissionRefillIntervalMs,
                self.rate_limit_admission_refill_interval_ms,
            ),
            (
                RateLimitKey::PredecisionRefusalBurst,
                self.rate_limit_predecision_refusal_burst,
            ),
            (
                RateLimitKey::PredecisionRefusalRefillIntervalMs,
                self.rate_limit_predecision_refusal_refill_interval_ms,
            ),
        ];
        for (key, value) in flags {
            if let Some(value) = value {
                config
                    .get_or_insert_with(RegistrarConfig::default)
                    .set(key, value);
            }
        }
        if let Some(config) = &config {
            config.validate().map_err(|e| e.to_string())?;
        }
        Ok(config)
    }

    pub fn registrar_params(&self) -> Result<registrar::Params, String> {
        Ok(registrar::Params {
            wave_hosts: self.wave_hosts,
            modules_per_host: self.modules_per_host,
            flood: self.flood,
            churn: self.churn,
            config: self.registrar_config()?,
        })
    }

    pub fn sizing_params(&self) -> Result<sizing::Params, String> {
        Ok(sizing::Params {
            wave_hosts: self.wave_hosts,
            modules_per_host: self.modules_per_host,
            config: self.registrar_config()?,
        })
    }

    /// The `[admit]` table of `--config`, if given: every key checked, each problem named.
    pub fn limits(&self) -> Result<Option<LimitsConfig>, String> {
        self.config
            .as_ref()
            .map(|path| {
                LimitsConfig::load(path).map_err(|e| format!("--config {}: {e}", path.display()))
            })
            .transpose()
    }

    pub fn quota_params(&self) -> Result<quota::Params, String> {
        let file = self.limits()?.and_then(|limits| limits.volume);
        Ok(quota::Params {
            quota: file.map(|volume| volume.quota),
            abusive: self.abusive,
            abusive_writes: self.abusive_writes,
            honest: self.honest,
            honest_writes: self.honest_writes,
            rotating: self.rotating,
            ..quota::Params::default()
        })
    }

    pub fn prefix_params(&self) -> prefix::Params {
        prefix::Params {
            run: Duration::from_secs(self.prefix_secs),
            attack_per_sec: self.prefix_attack,
            prefixes: self.prefixes,
            ..prefix::Params::default()
        }
    }

    pub fn fleet_params(&self) -> fleet::Params {
        fleet::Params {
            doors: 4,
            per_second: self.fleet_rate,
            burst: self.fleet_burst,
            run: Duration::from_secs(self.fleet_secs),
            lease_cap: self.lease_cap,
            cluster: self.cluster,
            fault: self.fault,
        }
    }

    /// `--quota` first, then `[admit.in_flight] quota` of `--config`.
    pub fn fairness_params(&self) -> Result<fairness::Params, String> {
        let file = self.limits()?.and_then(|limits| limits.in_flight);
        Ok(fairness::Params {
            quota: self.quota.or(file.map(|in_flight| in_flight.quota)),
            apply: Duration::from_micros(self.apply_us),
            human_ops: usize::try_from(self.human_ops).unwrap_or(usize::MAX),
            human_interval: Duration::from_micros(self.human_interval_us),
            agent_backlog: usize::try_from(self.agent_backlog).unwrap_or(usize::MAX),
        })
    }
}

/// Prints a clap error as one line (help and version as themselves) and picks the exit code.
pub fn report_parse_error(err: &clap::Error) -> ExitCode {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        _ => {
            let rendered = err.render().to_string();
            let first = rendered
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            eprintln!("admit-sim: {first} (see --help)");
            ExitCode::from(2)
        }
    }
}
