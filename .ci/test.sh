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
