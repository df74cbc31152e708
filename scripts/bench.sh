#!/usr/bin/env bash
# make bench: one release build of the benchmark binaries and the receiver, then each part in
# turn (PARTS="http limit scale cold", default all; a part whose binary does not exist is
# skipped), each on its own throwaway PostgreSQL with durability on, then bench-report writes
# bench/RESULTS.md (and bench/chart.py bench/throughput.png).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
parts=${PARTS:-http limit scale cold}
venv=${BENCH_VENV:-.venv-bench}
target_dir=${CARGO_TARGET_DIR:-$root/target}
bin="$target_dir/release"
mkdir -p bench/results

echo "make bench: release build (cargo build --release -p bench -p receiver)" >&2
nice -n 5 cargo build --release -p bench -p receiver

has() { [ -x "$bin/$1" ]; }
want() { [[ " $parts " == *" $1 "* ]]; }
durable() { HOOKLEDGER_PG_DURABLE=1 scripts/with-postgres.sh "$@"; }

if want http; then
  echo "make bench: part http (bench-http: receiver and peer over HTTP)" >&2
  # Logs of the server go to /dev/null inside bench-http; its progress goes to stderr.
  durable "$bin/bench-http" --serve-bin "$bin/bench-serve" --uvicorn "$venv/bin/uvicorn" \
    ${BENCH_HTTP_ARGS:-}
fi
if want limit || want scale; then
  if has bench-limit; then
    limit_parts=()
    want limit && limit_parts+=(limit)
    want scale && limit_parts+=(scale)
    echo "make bench: part(s) ${limit_parts[*]} (bench-limit)" >&2
    HOOKLEDGER_PG_DURABLE=1 \
      HOOKLEDGER_PG_OPTIONS="${HOOKLEDGER_PG_OPTIONS:--c shared_preload_libraries=pg_stat_statements}" \
      BENCH_PARTS="${limit_parts[*]}" \
      scripts/with-postgres.sh "$bin/bench-limit" ${BENCH_LIMIT_ARGS:-}
  else
    echo "make bench: bench-limit not built: limit and scale not run" >&2
  fi
fi
if want cold; then
  if has bench-cold; then
    echo "make bench: part cold (bench-cold)" >&2
    BENCH_RECEIVER_BIN="$bin/receiver" durable "$bin/bench-cold" ${BENCH_COLD_ARGS:-}
  else
    echo "make bench: bench-cold not built: cold not run" >&2
  fi
fi

if [ -x "$venv/bin/python" ]; then
  "$venv/bin/python" bench/chart.py bench/results bench/throughput.png || \
    echo "make bench: chart.py failed; RESULTS.md says so" >&2
fi
"$bin/bench-report" --results bench/results --out bench/RESULTS.md
echo "make bench: results in bench/RESULTS.md (parts: bench/results/*.json, *.md; chart: bench/throughput.png)"
