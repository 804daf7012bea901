//! Arbitrary histories of the fleet's lease thread (decisions of a few identities on a small
//! table, ring pushes and laps, turns step by step, Redis answers, faults, outages and
//! reconnects, clock jumps) against the reference of `admit::check::lease_worker`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| admit::check::lease_worker::fuzz_lease_worker(data));
