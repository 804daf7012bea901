#!/usr/bin/env bash
# Loom models of every concurrent protocol (loom-tests/), in their own target directory so the
# ordinary build never compiles loom.
#
# LOOM_MAX_PREEMPTIONS bounds how many times loom may preempt a thread per execution. 2 finds
# every bug class these protocols have shown and the whole suite runs in minutes on 2 cores;
# 3 multiplies the run time by well over ten (crossbeam and sharded-slab make the same trade).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export RUSTFLAGS="--cfg admit_loom ${RUSTFLAGS:-}"
cargo test --locked --release --manifest-path loom-tests/Cargo.toml
