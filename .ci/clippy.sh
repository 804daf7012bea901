#!/usr/bin/env bash
# Lints over every target (lib, bin, tests, benches, examples), warnings denied.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --locked --all-targets -- -D warnings
cargo clippy --locked --all-targets --no-default-features -- -D warnings
