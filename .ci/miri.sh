#!/usr/bin/env bash
# The library's threaded tests under miri, when the nightly toolchain and its miri component
# are present or can be added. If they cannot, say why and skip: a machine without miri is not
# a failing build.
#
# What miri adds here: the crate has no `unsafe`, so it is miri's data-race detector and its
# weak-memory emulation on the tests that share atomics between real threads, plus the
# `unsafe` reads inside SipHash (siphasher) on one hashing test. Those are the tests named
# below. The sequential logic (reference models, corpus replays, the volume quota's cases) is
# covered by the ordinary run, the proptests, the loom models and the fuzz smoke; under miri
# every test also pays seconds of interpreter start-up, and all 117 took 18 minutes here (two
# cores shared with a loom run). Test sizes shrink under cfg(miri).
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
# Substrings of test names (both runners take several and run what matches any).
THREADED=(racing concurrent thread wait_idle two_connections monotonic gate:: home_stays_inside_the_table)
if cargo nextest --version >/dev/null 2>&1; then
  cargo +nightly miri nextest run --locked -p admit --lib --no-default-features --no-fail-fast "${THREADED[@]}"
else
  cargo +nightly miri test --locked -p admit --lib --no-default-features -- "${THREADED[@]}"
fi
