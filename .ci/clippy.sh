#!/usr/bin/env bash
# Lints over every target (lib, bin, tests, benches, examples), warnings denied, with default
# features, without, and with each optional feature; then the API docs (with and without the
# `tower` layer), whose broken links are errors too.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --locked --all-targets -- -D warnings
# The library alone, so that admit-sim's use of `config` does not switch it back on.
cargo clippy --locked --all-targets -p admit --no-default-features -- -D warnings
cargo clippy --locked --all-targets -p admit --features quanta -- -D warnings
cargo clippy --locked --all-targets -p admit --features tokio -- -D warnings
cargo clippy --locked --all-targets -p admit --features tower -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit --features tower
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib -p admit --features tokio
