//! Runs each example program as a user would, the binary `cargo test` built beside this test
//! (in `target/<profile>/examples/`), and checks its exit status and what it printed. Each
//! server example serves on a free loopback port and is answered by a real client.
//!
//! `cargo test` builds every example whose features are on before it runs any test; a run
//! of this target alone (`cargo test --test examples`) does not, so build them first
//! (`cargo build --examples --all-features --profile test`).

// Test code: a failed unwrap is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::PathBuf;
use std::process::Command;

/// The built example `name`, run with `args`: its standard output, or a panic naming what
/// went wrong (a missing binary, a non-zero exit).
fn run(name: &str, args: &[&str]) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<name>
    let dir: PathBuf = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary sits in target/<profile>/deps")
        .join("examples");
    let bin = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is not built: run `cargo test` (which builds the examples), or \
         `cargo build --examples --all-features --profile test` first",
        bin.display()
    );
    let out = Command::new(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} {args:?} exited with {}\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn sequencer_bounds_the_flood_ahead_of_the_human() {
    let out = run("sequencer", &[]);
    assert!(out.contains("Quotas::new() (Q = 32)"), "{out}");
}

#[test]
fn registrar_runs_its_verb_layer() {
    let out = run("registrar", &[]);
    assert!(!out.is_empty());
}

#[cfg(feature = "tower")]
#[test]
fn per_ip_serves_one_request_on_loopback() {
    let out = run("per_ip", &["--once"]);
    assert!(out.contains("GET / -> 200 OK: hello"), "{out}");
}

#[cfg(feature = "tower")]
#[test]
fn http_admits_and_refuses_its_scripted_burst() {
    let out = run("http", &[]);
    assert!(out.contains("429"), "{out}");
}

#[cfg(feature = "tower")]
#[test]
fn behind_proxy_charges_the_forging_client_to_its_own_address() {
    let out = run("behind_proxy", &[]);
    assert!(
        out.contains("X-Forwarded-For: 198.51.100.1, 127.0.0.2"),
        "{out}"
    );
    assert!(
        out.contains("the client was charged to its own address every time"),
        "{out}"
    );
}

#[cfg(feature = "tower")]
#[test]
fn per_route_charges_failed_logins_and_costly_reports_apart() {
    let out = run("per_route", &[]);
    let lines: Vec<&str> = out.lines().collect();
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    // Four successes free, three failures charged, then the right password refused.
    assert_eq!(count("POST /login (right password) -> 200 OK"), 4, "{out}");
    assert_eq!(count("POST /login (wrong password) -> 401"), 3, "{out}");
    assert_eq!(count("POST /login (right password) -> 429"), 1, "{out}");
    // `//login` is not routed to the login handler, and not charged to its rule.
    assert_eq!(count("POST //login (right password) -> 404"), 1, "{out}");
    // Three reports of 10 units fit in 30; the fourth is refused; `/` still passes.
    assert_eq!(count("GET /reports/3 -> 200 OK"), 1, "{out}");
    assert_eq!(count("GET /reports/4 -> 429"), 1, "{out}");
    assert_eq!(count("GET / -> 200 OK"), 1, "{out}");
}

#[cfg(feature = "tower")]
#[test]
fn grpc_answers_resource_exhausted_past_the_burst() {
    let out = run("grpc", &["--once"]);
    assert!(out.contains("call 3: ResourceExhausted, retry in"), "{out}");
}

#[cfg(feature = "redis")]
#[test]
fn fleet_shares_one_budget_between_two_replicas() {
    let out = run("fleet", &[]);
    let installed = Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if installed {
        assert!(out.contains("together:"), "{out}");
    } else {
        assert!(out.contains("no redis-server on PATH"), "{out}");
    }
}

#[cfg(feature = "config")]
#[test]
fn live_reload_applies_a_good_file_and_keeps_the_limits_over_a_bad_one() {
    let out = run("live_reload", &[]);
    assert!(out.contains("client-7: 20 of 25 calls admitted"), "{out}");
    assert!(out.contains("refused, nothing applied"), "{out}");
}
