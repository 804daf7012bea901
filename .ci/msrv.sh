#!/usr/bin/env bash
# The minimum supported Rust version (Cargo.toml `rust-version`): the library with every
# feature, against the committed lock file, on that exact toolchain (installed when missing).
# The floor is the dependencies': with the locked versions, `redis` (feature `redis`) and the
# `url`/ICU crates it brings need 1.88; the default features alone build on 1.87.
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
if [ -z "$msrv" ]; then
  echo "msrv.sh: no rust-version in Cargo.toml" >&2
  exit 1
fi
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$msrv" --profile minimal
fi
# Its own target directory: artifacts of another compiler are never reused anyway.
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/msrv" cargo "+$msrv" check --locked --all-features -p admit
