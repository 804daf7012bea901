#!/usr/bin/env bash
# A long adversarial run of one cargo-fuzz target (not part of .ci/run): SECONDS of fuzzing
# (default 1200) without a sanitizer, on stable, from a scratch copy of the checked-in corpus.
# On a crash the failing input is copied into fuzz/corpus/TARGET/ as crash-*, so that the
# corpus replay in `cargo test` reproduces it from then on, and the script fails.
# Usage: bash .ci/fuzz-long.sh TARGET [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
target=$1
seconds=${2:-1200}
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz missing: installing it (cargo install --locked cargo-fuzz)"
  cargo install --locked cargo-fuzz
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/corpus" "$scratch/artifacts"
cp fuzz/corpus/"$target"/* "$scratch/corpus/" 2>/dev/null || true
log="$scratch/log"
start=$SECONDS
if cargo fuzz run -s none "$target" "$scratch/corpus" -- \
    -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$scratch/artifacts/" >"$log" 2>&1; then
  status=passed
else
  status=FAILED
fi
execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
echo "$target: $status after $((SECONDS - start)) s, ${execs:-unknown} executions"
if [ "$status" = FAILED ]; then
  tail -n 60 "$log"
  for crash in "$scratch"/artifacts/*; do
    [ -e "$crash" ] || continue
    name="crash-$(sha1sum "$crash" | cut -c1-12)"
    cp "$crash" "fuzz/corpus/$target/$name"
    echo "crash input saved as fuzz/corpus/$target/$name"
  done
  exit 1
fi
