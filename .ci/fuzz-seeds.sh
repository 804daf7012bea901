#!/usr/bin/env bash
# Regenerates a fuzz target's small checked-in seed corpus: fuzz for SECONDS (default 60),
# minimise, keep about 24 inputs (the 12 largest and 12 others) as fuzz/corpus/TARGET/seed-*.
# Usage: bash .ci/fuzz-seeds.sh TARGET [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
target=$1
seconds=${2:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "fuzz/corpus/$target"
cp fuzz/corpus/"$target"/seed-* "$work/corpus/" 2>/dev/null || true
cargo fuzz run -s none "$target" "$work/corpus" -- -max_total_time="$seconds" >"$work/log" 2>&1 ||
  { tail -n 40 "$work/log"; exit 1; }
mkdir "$work/min"
cargo fuzz run -s none "$target" "$work/min" "$work/corpus" -- -merge=1 >"$work/log" 2>&1
{ ls -S "$work/min" | head -n 12; ls "$work/min" | sort | awk 'NR % 7 == 1' | head -n 12; } |
  sort -u >"$work/keep"
rm -f fuzz/corpus/"$target"/seed-*
while read -r f; do cp "$work/min/$f" "fuzz/corpus/$target/seed-${f:0:12}"; done <"$work/keep"
echo "$target: $(ls fuzz/corpus/"$target" | wc -l) seeds, $(du -sb fuzz/corpus/"$target" | cut -f1) bytes"
