#!/usr/bin/env bash
# Regenerates docs/benchmarks.md and docs/benchmarks.svg from one sitting: the instruction
# bench (callgrind, the measure that decides on a shared machine) and a short criterion run of
# the rows the page shows, then `benches/report/report.py` fills `benches/report/template.md`
# and draws the plot. About 10 minutes on a 2-vCPU machine, most of it the benches themselves.
#
#   bash benches/report.sh            # the real run: writes docs/benchmarks.{md,svg}
#   bash benches/report.sh --quick    # a smoke test (about 3 minutes): one callgrind run per
#                                     # case, criterion cut short, the paired and scaling runs
#                                     # skipped; writes $CARGO_TARGET_DIR/report/out/ instead
#   bash benches/report.sh --out DIR  # write the page and the plot to DIR
#
# Needs valgrind (apt-get install -y valgrind) and python3; a redis-server at
# /usr/bin/redis-server for the fleet's rows (without one they print as "–"). Not a step of
# .ci/run: too slow. Run it on an otherwise idle machine; the instruction counts do not care,
# the nanoseconds do.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
out=docs
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --out) out="$2"; shift ;;
    *) echo "usage: bash benches/report.sh [--quick] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done

command -v valgrind >/dev/null || { echo "report: valgrind is needed (apt-get install -y valgrind)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "report: python3 is needed" >&2; exit 1; }

target=${CARGO_TARGET_DIR:-target}
work="$target/report"
rm -rf "$work/criterion" "$work"/*.log "$work/commands.txt"
mkdir -p "$work/criterion"
if [ "$quick" = 1 ] && [ "$out" = docs ]; then out="$work/out"; fi

features=tower,redis
if [ "$quick" = 1 ]; then
  icount_runs=1
  criterion_args=(--warm-up-time 0.1 --measurement-time 0.2 --sample-size 10)
else
  icount_runs=5
  criterion_args=(--warm-up-time 1 --measurement-time 2.5 --sample-size 50)
fi

start=$SECONDS
step() { printf 'report: %-16s %s\n' "$1" "$(date +%T)"; }

step build
cargo bench --locked -p admit --no-run --features "$features" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log"; exit 1; }

# One bench into its log; on failure, the end of the log.
run() {
  local name=$1
  shift
  step "$name"
  if ! "$@" >"$work/$name.log" 2>&1; then
    tail -30 "$work/$name.log" >&2
    echo "report: $name failed (log: $work/$name.log)" >&2
    exit 1
  fi
}

# A criterion bench, only the rows the page shows (criterion takes one regex).
criterion() {
  local name=$1 filter=$2
  shift 2
  echo "$name=cargo bench --bench $name --features $features -- ${criterion_args[*]} '$filter'" >>"$work/commands.txt"
  run "$name" env CRITERION_HOME="$work/criterion" "$@" \
    cargo bench --locked --bench "$name" --features "$features" -- "${criterion_args[@]}" "$filter"
}

echo "instructions=ADMIT_ICOUNT_RUNS=$icount_runs cargo bench --bench instructions --features $features" >>"$work/commands.txt"
run instructions env ADMIT_ICOUNT_RUNS="$icount_runs" \
  cargo bench --locked --bench instructions --features "$features"
criterion bucket '^bucket/(floor|try_acquire_at|governor check|try_acquire\(&MonotonicClock\))'
criterion limiter '^limiter/(hit, 1 hot key|hit, 200 keys cycled|saturated miss[^/]*|2 threads[^/]*)/(admit charge \(own clock\)|admit charge_at|admit try_acquire_hashed_at|governor check_key \(own clock\))'
if [ "$quick" = 1 ]; then
  criterion fairness '^fairness/(uncontended|uncontended-in-flight|2-threads-distinct-actors|2-threads-one-actor)/(admit|dashmap|mutex-hashmap)$' FAIRNESS_SKIP_MEMORY=1
else
  criterion fairness '^fairness/(uncontended|uncontended-in-flight|2-threads-distinct-actors|2-threads-one-actor)/(admit|dashmap|mutex-hashmap)$'
fi
criterion quota '^quota(, 2 threads|, 2 threads, one actor)?/(admit check_at, rows = 4 \(default\)|admit check, default build|DashMap<String, AtomicU64>|governor keyed)'
criterion request '^request/1 thread/'
criterion tower '^tower/'
criterion fleet '^fleet/'
if [ "$quick" = 0 ]; then
  echo "request_paired=cargo bench --bench request_paired --features $features" >>"$work/commands.txt"
  echo "scaling=ADMIT_SCALING_THREADS=1,2 ADMIT_SCALING_MS=500 cargo bench --bench scaling --features $features" >>"$work/commands.txt"
  run request_paired cargo bench --locked --bench request_paired --features "$features"
  run scaling env ADMIT_SCALING_THREADS=1,2 ADMIT_SCALING_MS=500 \
    cargo bench --locked --bench scaling --features "$features"
fi

step write
{
  echo "\$ nproc"
  nproc
  echo "\$ lscpu | head"
  lscpu | head
  echo "\$ rustc --version; valgrind --version"
  rustc --version
  valgrind --version
  if [ -x /usr/bin/redis-server ]; then
    echo "\$ redis-server --version"
    /usr/bin/redis-server --version
  fi
} >"$work/machine.txt"

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- src benches Cargo.toml Cargo.lock || commit="$commit, with uncommitted changes"
minutes=$(( (SECONDS - start + 30) / 60 ))
{
  echo "commit=$commit"
  echo "elapsed=$minutes"
  echo "mode=$([ "$quick" = 1 ] && echo quick || echo full)"
  echo "criterion_args=${criterion_args[*]}"
  echo "icount_runs=$icount_runs"
  echo "features=$features"
} >"$work/meta.txt"

python3 benches/report/report.py "$work" "$out"
echo "report: done in $((SECONDS - start)) s; logs in $work"
