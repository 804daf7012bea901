//! Loom models of admit's concurrent protocols live in `tests/`, one file per protocol.
//!
//! They must be built with `RUSTFLAGS="--cfg admit_loom"` (see `.ci/loom.sh`), which switches
//! admit's `sync` facade onto loom's instrumented atomics.

#[cfg(not(admit_loom))]
compile_error!("build the loom models with RUSTFLAGS=\"--cfg admit_loom\" (see .ci/loom.sh)");
