#!/usr/bin/env bash
# Instructions per decision under callgrind (`benches/instructions.rs`), admit's rows held to
# the committed baseline `benches/instructions.baseline` (one `name<TAB>instructions` line per
# row): fails if any row grows more than 3 % over its baseline, printing the row, the baseline
# and the new count. Counts are deterministic but for a few instructions (the tables' hash keys
# are drawn per run), so 3 % is a change in the code, not noise. Rows faster than the baseline
# pass; rewrite it to keep the gain.
#
# Rewrite the baseline from this run (after a change that is meant to cost more, or to keep a
# gain), then commit it with the change:
#
#   ADMIT_BLESS=1 bash .ci/instructions.sh
#
# Built with `tower` and `redis`, so the layer's row and the fleet's leased decision are
# counted too; the fleet row needs a local redis-server (installed here on CI, as in
# .ci/test.sh). valgrind is installed when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=benches/instructions.baseline
limit_percent=3

missing=()
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
[ -x /usr/bin/redis-server ] || [ "${CI:-}" != true ] || missing+=(redis-server)
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${missing[@]}"
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Five processes per case: a 200-key row moves by up to about 2 % with the hash keys a run
# draws; the mean of five moves by well under 1 %.
ADMIT_ICOUNT_RUNS=5 ADMIT_ICOUNT_OUT="$out" cargo bench --locked --bench instructions --features tower,redis

if [ "${ADMIT_BLESS:-}" = 1 ]; then
  cp "$out" "$baseline"
  echo "instructions: wrote $baseline:"
  cat "$baseline"
  exit 0
fi

# Each baseline row against this run: more than `limit_percent` over fails; a row the run did
# not measure (no redis-server) is reported, and fails only on CI.
awk -F'\t' -v limit="$limit_percent" -v ci="${CI:-}" '
  NR == FNR { now[$1] = $2; next }
  {
    name = $1; base = $2; seen[name] = 1
    if (!(name in now)) {
      printf "instructions: %s: not measured in this run (baseline %d)\n", name, base
      if (ci == "true") failed = 1
      next
    }
    growth = 100 * (now[name] - base) / base
    verdict = growth > limit ? "FAIL" : "ok"
    printf "instructions: %-4s %-36s baseline %6d   now %6d   %+.1f %%\n", verdict, name, base, now[name], growth
    if (growth > limit) failed = 1
  }
  END {
    for (name in now) if (!(name in seen)) printf "instructions: %s: %d, not in %s yet (ADMIT_BLESS=1 adds it)\n", name, now[name], FILENAME
    if (failed) { printf "instructions: a row grew more than %d %% over %s (ADMIT_BLESS=1 rewrites it)\n", limit, FILENAME; exit 1 }
  }
' "$out" "$baseline"
