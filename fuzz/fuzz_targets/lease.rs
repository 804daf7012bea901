//! Arbitrary histories of one key's fleet lease word (decisions, requests sent, answered, lost
//! or faulted, Redis down and up, reclaim attempts) against the signed-balance reference.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| admit::check::lease::fuzz_lease(data));
