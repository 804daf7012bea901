#!/usr/bin/env bash
# The unit, property, integration, example and doc tests, including every fuzz target's
# checked-in corpus replayed through the target's body. The test profile is optimised
# (Cargo.toml [profile.test]) because the churn tests drive millions of operations; debug
# assertions and overflow checks stay on.
set -euo pipefail
cd "$(dirname "$0")/.."
# One build with every optional feature on, so that each feature's own tests and doc examples
# run beside everything else (features only add: a build with none of them runs the same
# decision code, and clippy compiles every target with no features and with each alone):
# - `quanta`: the TSC clock's tests and its doc example;
# - `tower`: the layer's tests against a real axum server on loopback, and its doc examples;
# - `tokio`: async waiting, whose tests and examples run in tokio's paused time;
# - `metrics` and `tracing`: exact counts read back from a DebuggingRecorder, the captured
#   refusal events, and the `metrics_alloc` target that counts 0 bytes allocated by decisions
#   with metrics attached (one test in its own binary, so the counting allocator sees nothing
#   else).
# - `redis`: the fleet limiter against real redis-servers the tests start and stop themselves
#   (the `fleet` target); installed here when missing, so CI always runs them (locally, a
#   missing binary skips them with a one-line reason).
# - `redis-cluster`: the same on a local Redis Cluster of 6 redis-servers (3 primaries, 3
#   replicas) each test creates with `redis-cli --cluster create`, then reshards or fails
#   over, and stops: the Debian package `redis-server` brings `redis-tools` (redis-cli).
# Two builds (default features, then all) took two full compilations of the test targets.
if ! { command -v redis-server && command -v redis-cli; } >/dev/null 2>&1 \
  && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server redis-tools
fi
cargo test --locked --all-features
# What each decision writes (`check::writes`): the crate's atomics swapped for ones that note
# every cache line written, so a separate build (its own target dir, default features, no
# metrics: the hit paths as shipped) that leaves the main one's artifacts alone.
RUSTFLAGS="--cfg admit_writes" cargo test --locked --lib --target-dir target/writes check::writes
# The `http` example, run once, built in the same profile and features to reuse the artifacts.
cargo run --locked -p admit --profile test --all-features --example http
