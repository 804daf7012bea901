#!/usr/bin/env bash
# Lints over every target (lib, bin, tests, benches, examples), warnings denied, with default
# features, without, and with each optional feature; then the API docs (without optional
# features, with the `tower` layer, with `metrics` and `tracing`), whose broken links are errors
# too.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --locked --all-targets -- -D warnings
# The library alone, so that admit-sim's use of `config` does not switch it back on.
cargo clippy --locked --all-targets -p admit --no-default-features -- -D warnings
cargo clippy --locked --all-targets -p admit --features quanta -- -D warnings
cargo clippy --locked --all-targets -p admit --features tokio -- -D warnings
cargo clippy --locked --all-targets -p admit --features tower -- -D warnings
# Observability: both features together over every target (their tests, the metrics_alloc
# test and the bench pair included), then each alone on the library, where a cfg that only
# one of them reads would leave something unused.
cargo clippy --locked --all-targets -p admit --features metrics,tracing -- -D warnings
cargo clippy --locked --lib -p admit --features metrics -- -D warnings
cargo clippy --locked --lib -p admit --features tracing -- -D warnings
# The fleet limiter on Redis: its tests, bench and the library alone.
cargo clippy --locked --all-targets -p admit --features redis -- -D warnings
cargo clippy --locked --all-targets -p admit --features redis-cluster -- -D warnings
# The write-recording atomics and the test that reads them (`--cfg admit_writes`), in the
# target dir the test step builds that cfg in.
RUSTFLAGS="--cfg admit_writes" cargo clippy --locked --lib --tests -p admit \
  --target-dir target/writes -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit --features tower
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit --features tokio
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit --features metrics,tracing
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit --features redis
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit --features redis-cluster
