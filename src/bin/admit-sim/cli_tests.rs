//! The `admit-sim` binary from outside: bad input exits non-zero with one named error line,
//! `--json` parses and carries every cell, and README.md shows the binary's real headings.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_admit-sim"))
        .args(args)
        .arg("--quiet")
        .output()
        .expect("admit-sim runs")
}

/// Small parameters, so every scenario finishes in well under a second.
const SMALL: &[&str] = &[
    "--human-ops",
    "20",
    "--human-interval-us",
    "300",
    "--apply-us",
    "20",
    "--agent-backlog",
    "400",
    "--flood",
    "2000",
    "--churn",
    "1000",
    "--abusive",
    "20",
    "--abusive-writes",
    "1300",
    "--honest",
    "200",
    "--honest-writes",
    "5",
    "--rotating",
    "5000",
    "--prefix-attack",
    "20000",
    "--prefix-secs",
    "1",
    "--prefixes",
    "4",
];

fn fails_naming(args: &[&str], needle: &str) {
    let out = sim(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed a result");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} does not name {needle:?}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {stderr:?}"
    );
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"));
}

#[test]
fn bad_input_is_one_named_line_and_a_non_zero_exit() {
    fails_naming(&["no-such-scenario"], "no-such-scenario");
    fails_naming(&["sizing", "--wave-hosts", "0"], "--wave-hosts");
    fails_naming(
        &["sizing", "--modules-per-host", "-4"],
        "--modules-per-host",
    );
    fails_naming(&["registrar", "--flood", "-1"], "--flood");
    fails_naming(&["fairness", "--quota", "0"], "--quota");
    fails_naming(
        &["sizing", "--rate-limit-admission-burst", "0"],
        "--rate-limit-admission-burst",
    );
    fails_naming(
        &["sizing", "--config", "/nonexistent/admit.toml"],
        "--config",
    );

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let broken = write(
        "broken.toml",
        "[registrar\nrate_limit_admission_burst = 1\n",
    );
    fails_naming(&["sizing", "--config", &broken], "TOML");
    let zero = write("zero.toml", "[registrar]\nrate_limit_admission_burst = 0\n");
    fails_naming(&["sizing", "--config", &zero], "rate_limit_admission_burst");
    let negative = write(
        "neg.toml",
        "[registrar]\nrate_limit_predecision_refusal_burst = -3\n",
    );
    fails_naming(
        &["sizing", "--config", &negative],
        "rate_limit_predecision_refusal_burst",
    );
    let fraction = write(
        "frac.toml",
        "[registrar]\nrate_limit_admission_refill_interval_ms = 0.5\n",
    );
    fails_naming(
        &["sizing", "--config", &fraction],
        "rate_limit_admission_refill_interval_ms",
    );
}

#[test]
fn a_valid_config_file_runs_beside_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.toml");
    std::fs::write(
        &path,
        "[registrar]\naudit_record_dir = \"/var/lib/audit\"\nrate_limit_admission_burst = 2400\n",
    )
    .unwrap();
    let out = sim(&[
        "sizing",
        "--wave-hosts",
        "200",
        "--modules-per-host",
        "12",
        "--json",
        "--config",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let covered = &json["sizing"]["rows"]["covered"];
    assert_eq!(covered["admit defaults"], "no");
    assert_eq!(covered["your numbers"], "yes");
}

#[test]
fn json_parses_and_carries_every_cell_of_every_table() {
    let mut args = vec![
        "fairness",
        "registrar",
        "quota",
        "sizing",
        "prefix",
        "--json",
    ];
    args.extend_from_slice(SMALL);
    let out = sim(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for scenario in [
        "fairness",
        "registrar",
        "quota",
        "quota_nat",
        "sizing",
        "prefix",
    ] {
        let table = &json[scenario];
        let columns = table["columns"].as_array().unwrap();
        let rows = table["rows"].as_object().unwrap();
        assert!(rows.len() >= 5, "{scenario}: only {} rows", rows.len());
        for (key, cells) in rows {
            let cells = cells.as_object().unwrap();
            assert_eq!(
                cells.len(),
                columns.len(),
                "{scenario}.{key} misses a column"
            );
            for column in columns {
                let cell = &cells[column.as_str().unwrap()];
                assert!(
                    cell.is_number() || cell.is_string(),
                    "{scenario}.{key}: {cell}"
                );
            }
        }
    }
}

#[test]
fn the_readme_shows_the_binarys_real_scenario_headings() {
    let mut args = vec!["fairness", "registrar", "quota", "prefix", "--json"];
    args.extend_from_slice(SMALL);
    let out = sim(&args);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../README.md"))
            .unwrap();
    let in_readme: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("== ").and_then(|l| l.strip_suffix(" ==")))
        .collect();
    let printed: Vec<&str> = ["fairness", "registrar", "quota", "quota_nat", "prefix"]
        .iter()
        .map(|s| json[*s]["heading"].as_str().unwrap())
        .collect();
    assert_eq!(
        in_readme, printed,
        "README.md's pasted output is out of date"
    );
}

/// The documented example file, as the tests read it: it must stay a file admit-sim runs.
fn example_file() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../docs/admit.example.toml")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_example_limits_file_sets_the_quotas_the_scenarios_run() {
    let example = example_file();
    let mut args = vec!["fairness", "quota", "--json", "--config", &example];
    args.extend_from_slice(SMALL);
    let out = sim(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let columns = |scenario: &str| -> Vec<String> {
        json[scenario]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect()
    };
    // [admit.in_flight] quota = 8 in the example.
    assert!(
        columns("fairness").contains(&"your quota (Q=8)".to_owned()),
        "{:?}",
        columns("fairness")
    );
    // [admit.volume]: 1200 events and 8 MiB per 60 s.
    assert!(
        columns("quota").contains(&"your quota (1200/8388608 B per 60s)".to_owned()),
        "{:?}",
        columns("quota")
    );
}

#[test]
fn a_bad_admit_key_in_the_config_is_one_named_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.toml");
    std::fs::write(
        &path,
        "[admit.in_flight]\nquota = 4\n\n[[admit.limiter.class]]\nburst = 20\nrate = \"10/m\"\n",
    )
    .unwrap();
    fails_naming(
        &["fairness", "--config", path.to_str().unwrap()],
        "admit.limiter.class[0].rate: \"10/m\" is not a rate",
    );
    std::fs::write(
        &path,
        "[admit.volume]\nevents = 10\nbytes = 10\nwindw = \"1s\"\n",
    )
    .unwrap();
    fails_naming(
        &["quota", "--config", path.to_str().unwrap()],
        "admit.volume.windw",
    );
}
