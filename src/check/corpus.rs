//! Replays each fuzz target's checked-in corpus (`fuzz/corpus/<target>/seed-*`) through the
//! same body the fuzzer runs, so the ordinary test run keeps every seed passing.

use std::path::PathBuf;

/// Feeds every seed of `target` to `body`; fails if the corpus is missing or empty.
pub fn replay(target: &str, body: fn(&[u8])) {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "fuzz", "corpus", target]
        .iter()
        .collect();
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} unreadable: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
        })
        .collect();
    seeds.sort();
    assert!(
        !seeds.is_empty(),
        "corpus {} has no seed-* files",
        dir.display()
    );
    let limit = if cfg!(miri) { 1 } else { seeds.len() };
    for seed in seeds.iter().take(limit) {
        let data = std::fs::read(seed).unwrap_or_else(|e| panic!("{}: {e}", seed.display()));
        body(&data);
    }
}

#[test]
fn bucket_corpus() {
    replay("bucket", super::bucket::fuzz_bucket);
}

#[test]
fn limiter_miss_path_corpus() {
    replay("limiter_miss_path", super::limiter::fuzz_limiter_miss_path);
}

#[test]
fn adaptive_corpus() {
    replay("adaptive", super::adaptive::fuzz_adaptive);
}

#[test]
fn fairness_corpus() {
    replay("fairness", super::fairness::fuzz_fairness);
}

#[test]
fn quota_corpus() {
    replay("quota", super::quota::fuzz_quota);
}

#[test]
fn lease_corpus() {
    replay("lease", super::lease::fuzz_lease);
}

#[test]
fn lease_worker_corpus() {
    replay("lease_worker", super::lease_worker::fuzz_lease_worker);
}
