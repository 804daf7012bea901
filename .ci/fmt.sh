#!/usr/bin/env bash
# Formatting of the crate and of its two side crates.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo fmt --manifest-path loom-tests/Cargo.toml -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
