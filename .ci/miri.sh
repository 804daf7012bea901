#!/usr/bin/env bash
# The library's unit tests under miri, when the nightly toolchain and its miri component are
# present or can be added. If they cannot, say why and skip: a machine without miri is not a
# failing build. Test sizes shrink under cfg(miri), and scale tests (millions of operations,
# minutes each under the interpreter) are ignored there, and so are the sequential logic tests
# (reference models, corpus replays, the volume quota's full-size cases): the crate has no
# `unsafe`, so what miri adds is its data-race and weak-memory checks on the threaded tests.
# The ordinary run, the proptests and the fuzz smoke cover the rest.
# With cargo-nextest present, tests run as separate processes on every core.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "miri skipped: no nightly toolchain on this machine"
  exit 0
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  if ! rustup component add miri rust-src --toolchain nightly; then
    echo "miri skipped: 'rustup component add miri rust-src --toolchain nightly' failed (offline or unavailable)"
    exit 0
  fi
fi
# Isolation off: proptest reads its persisted failure seeds from disk.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
if cargo nextest --version >/dev/null 2>&1; then
  cargo +nightly miri nextest run --locked -p admit --lib --no-default-features --no-fail-fast
else
  cargo +nightly miri test --locked -p admit --lib --no-default-features
fi
