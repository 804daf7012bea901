//! What more than one bench uses: the floors' bare read-modify-write (`benches/quota.rs`,
//! `benches/request.rs`). A directory module, so that Cargo does not take it for a bench.

use std::sync::atomic::{AtomicU32, Ordering};

/// One load and one CAS that adds `by`: a decision's read-modify-write without its decision.
#[inline]
pub fn load_and_cas(word: &AtomicU32, by: u32) {
    let seen = word.load(Ordering::Acquire);
    let _ = word.compare_exchange(
        seen,
        seen.wrapping_add(by),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}
