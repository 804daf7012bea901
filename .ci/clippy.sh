#!/usr/bin/env bash
# Lints over every target (lib, bin, tests, benches, examples), warnings denied, with default
# features and without; then the API docs, whose broken links are errors too.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --locked --all-targets -- -D warnings
cargo clippy --locked --all-targets --no-default-features -- -D warnings
cargo clippy --locked --all-targets --features quanta -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib
