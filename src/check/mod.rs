//! Reference models and op-sequence drivers, shared by the proptests and the cargo-fuzz
//! targets so both check the same invariants. Compiled only for tests and the `fuzzing`
//! feature; a violated invariant panics, which is how both harnesses report it.
#![allow(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::len_without_is_empty,
    missing_docs
)]

pub mod adaptive;
pub mod bucket;
pub mod bytes;
pub mod quota;

/// Proptest settings shared by every property test: `cases` (shrunk under miri), with failing
/// seeds persisted beside the test's source file rather than in a new top-level directory.
#[cfg(test)]
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, FileFailurePersistence};
    Config {
        cases: if cfg!(miri) { 2 } else { cases },
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

// The checked-in corpora replayed: sequential op sequences, which the ordinary run and the fuzz
// smoke cover; minutes under miri, which adds nothing to them (this crate has no `unsafe`).
#[cfg(all(test, not(miri)))]
mod corpus;
pub mod fairness;
// What each decision writes: only with `--cfg admit_writes`, whose atomics record their writes.
pub mod lease;
pub mod lease_worker;
pub mod limiter;
#[cfg(all(test, admit_writes))]
mod writes;
