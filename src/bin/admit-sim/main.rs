//! `admit-sim`: stands up a small single-writer system in-process, attacks it the way the
//! seeds describe, and prints what each of admit's defences changed, side by side with no
//! defence. Also how an operator sizes the limits for their own fleet.
#![allow(clippy::unwrap_used)] // only in this binary's tests; production paths return errors

mod adaptive;
mod cli;
mod cluster;
mod fairness;
mod fleet;
mod plot;
mod prefix;
mod progress;
mod quota;
mod registrar;
mod report;
mod sizing;

use clap::Parser;
use cli::{Cli, Scenario};
use report::Table;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return cli::report_parse_error(&err),
    };
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("admit-sim: {}", one_line(&message));
            ExitCode::from(2)
        }
    }
}

/// An error as one line: a multi-line message (a TOML parser's excerpt) keeps its first line,
/// which says where, and its last, which says what.
fn one_line(message: &str) -> String {
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines.as_slice() {
        [] => "failed".to_string(),
        [only] => (*only).to_string(),
        [first, .., last] => format!("{first}: {last}"),
    }
}

/// Runs the chosen scenarios and prints their tables (or JSON).
fn run(cli: &Cli) -> Result<(), String> {
    cli.validate()?;
    progress::set_quiet(cli.json || cli.quiet);
    let mut tables: Vec<Table> = Vec::new();
    for scenario in cli.scenarios() {
        match scenario {
            Scenario::Fairness => {
                let params = cli.fairness_params()?;
                let runs = fairness::run(&params);
                if let Some(path) = &cli.svg {
                    let series: Vec<_> = runs
                        .iter()
                        .map(|r| (r.label.clone(), r.waits.clone()))
                        .collect();
                    plot::waits_svg(path, &series)?;
                }
                tables.push(fairness::table(&params, &runs));
            }
            Scenario::Adaptive => {
                let params = adaptive::Params::default();
                let runs = adaptive::run(&params);
                if let Some(path) = &cli.svg {
                    plot::waits_svg(path, &adaptive::human_waits(&runs))?;
                }
                tables.push(adaptive::table(&params, &runs));
            }
            Scenario::Registrar => {
                let params = cli.registrar_params()?;
                let runs = registrar::run(&params)?;
                tables.push(registrar::table(&params, &runs));
            }
            Scenario::Quota => {
                let params = cli.quota_params()?;
                let runs = quota::run(&params)?;
                tables.push(quota::table(&params, &runs));
                let nat = quota::nat(&params)?;
                tables.push(quota::nat_table(&params, &nat));
            }
            Scenario::Prefix => {
                let params = cli.prefix_params();
                let runs = prefix::run(&params)?;
                tables.push(prefix::table(&params, &runs));
            }
            Scenario::Fleet => {
                let params = cli.fleet_params();
                let (runs, faulted) = fleet::run(&params)?;
                tables.push(fleet::table(&params, &runs));
                if let Some(faulted) = &faulted {
                    tables.push(fleet::fault_table(faulted));
                }
            }
            Scenario::Sizing => {
                let params = cli.sizing_params()?;
                let runs = sizing::run(&params)?;
                tables.push(sizing::table(&params, &runs));
            }
        }
    }
    if cli.json {
        let mut out = serde_json::Map::new();
        for t in &tables {
            out.insert(t.scenario.to_string(), t.json());
        }
        let text = serde_json::to_string_pretty(&out).map_err(|e| format!("--json: {e}"))?;
        println!("{text}");
    } else {
        for t in &tables {
            println!("{}", t.render());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
