#!/usr/bin/env bash
# The unit, property, integration, example and doc tests, including every fuzz target's
# checked-in corpus replayed through the target's body. The test profile is optimised
# (Cargo.toml [profile.test]) because the churn tests drive millions of operations; debug
# assertions and overflow checks stay on.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked
# The optional TSC clock's own tests.
cargo test --locked -p admit --lib --features quanta clock::
cargo test --locked -p admit --doc --features quanta QuantaClock
# The tower layer (feature `tower`): its tests against a real axum server on loopback, its doc
# examples (the filter `tower`, not `tower::`, also keeps the module's own example), then the
# `http` example run once, built in the same test profile so it reuses those artifacts.
cargo test --locked -p admit --features tower -- tower
cargo run --locked -p admit --profile test --example http --features tower
# Async waiting (feature `tokio`): its tests and examples run in tokio's paused time.
cargo test --locked -p admit --features tokio -- wait
# Observability (features `metrics` and `tracing`): exact counts read back from a
# DebuggingRecorder and the captured refusal events, the test target that counts 0 bytes
# allocated by decisions with metrics attached (one test in its own binary, so the counting
# allocator sees nothing else), and the doc examples of the gated items.
cargo test --locked -p admit --lib --features metrics,tracing -- metrics:: trace::
cargo test --locked -p admit --features metrics,tracing --test metrics_alloc
cargo test --locked -p admit --doc --features metrics,tracing metrics
