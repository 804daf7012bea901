//! The public-API suite: a crate of its own, so it reaches `admit` exactly as a user does and
//! cannot touch anything private or any test hook.
//!
//! Cargo builds it as the test target `api` (`cargo test --test api`).

// Test code: a failed unwrap is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod registrar;
mod surface;
