//! Arbitrary acquires by priority, releases, clock moves and new bounds against the sequential
//! reference of the adaptive total: the same L after every op, every admission below its
//! class's share of L, L within its bounds, every sample folded once.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| admit::check::adaptive::fuzz_adaptive(data));
