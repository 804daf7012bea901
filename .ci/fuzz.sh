#!/usr/bin/env bash
# A smoke run of every cargo-fuzz target: FUZZ_SECONDS each (default 20), without a sanitizer,
# on stable. Installs cargo-fuzz when it is missing. Each run starts from a scratch copy of the
# checked-in corpus, so the tree is left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz missing: installing it (cargo install --locked cargo-fuzz)"
  cargo install --locked cargo-fuzz
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cargo fuzz build -s none
for target in $(cargo fuzz list); do
  mkdir -p "$scratch/$target"
  cp fuzz/corpus/"$target"/seed-* "$scratch/$target/"
  echo "--- fuzzing $target for ${seconds} s"
  log="$scratch/$target.log"
  if ! cargo fuzz run -s none "$target" "$scratch/$target" -- \
      -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz target $target FAILED (crash input saved under fuzz/artifacts/$target/)"
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units)' "$log" || tail -n 3 "$log"
done
