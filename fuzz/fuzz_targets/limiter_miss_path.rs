//! Arbitrary charge, peek, clock and sweep sequences over identities from a small and a large
//! space against the HashMap reference, with the cap and removal invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| admit::check::limiter::fuzz_limiter_miss_path(data));
