//! Arbitrary quota histories, in a handful of colliding buckets, against the sequential
//! reference model.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| admit::check::quota::fuzz_quota(data));
