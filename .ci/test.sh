#!/usr/bin/env bash
# The unit, property, integration, example and doc tests, including every fuzz target's
# checked-in corpus replayed through the target's body. The test profile is optimised
# (Cargo.toml [profile.test]) because the churn tests drive millions of operations; debug
# assertions and overflow checks stay on.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked
# Every optional feature's own tests and doc examples, in ONE build with all features on (each
# feature set is a full rebuild of the crate's test targets, so one build instead of four):
# - `quanta`: the TSC clock's tests (`clock::`) and its doc example (`QuantaClock`);
# - `tower`: the layer's tests against a real axum server on loopback and its doc examples
#   (the filter `tower`, not `tower::`, also keeps the module's own example);
# - `tokio`: async waiting, whose tests and examples run in tokio's paused time (`wait`);
# - `metrics` and `tracing`: exact counts read back from a DebuggingRecorder, the captured
#   refusal events, and the `metrics_alloc` target that counts 0 bytes allocated by decisions
#   with metrics attached (one test in its own binary, so the counting allocator sees nothing
#   else).
cargo test --locked -p admit --all-features -- clock:: QuantaClock tower wait metrics trace::
# The `http` example, run once, built in the same profile and features to reuse the artifacts.
cargo run --locked -p admit --profile test --all-features --example http
