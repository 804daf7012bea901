//! Arbitrary bucket histories against the sequential reference model.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| admit::check::bucket::fuzz_bucket(data));
