//! Arbitrary acquire/release sequences over actors from a small and a large space against the
//! HashMap reference: quota never exceeded, entries gone at zero, shared overflow capped.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| admit::check::fairness::fuzz_fairness(data));
