//! What more than one bench uses: the floors' bare read-modify-write (`benches/quota.rs`,
//! `benches/request.rs`). A directory module, so that Cargo does not take it for a bench.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The volume quota's word (both counts and the stamp in one `AtomicU64`): one load and one
/// CAS that adds `by`, as [`load_and_cas`].
// Each bench that includes this module uses one or both of the two.
#[allow(dead_code)]
#[inline]
pub fn load_and_cas_u64(word: &AtomicU64, by: u64) {
    let seen = word.load(Ordering::Acquire);
    let _ = word.compare_exchange(
        seen,
        seen.wrapping_add(by),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// One load and one CAS that adds `by`: a decision's read-modify-write without its decision.
// As `load_and_cas_u64`.
#[allow(dead_code)]
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
