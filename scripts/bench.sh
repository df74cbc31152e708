#!/usr/bin/env bash
# make bench: one release build of the benchmark binaries and the receiver, then each part in
# turn (PARTS="http limit scale cold verify", default all; a part whose binary does not exist is
# skipped), each on its own throwaway PostgreSQL with durability on (verify needs none: it is a
# micro-benchmark of signature verification in one process), then bench-report writes
# dev/bench/RESULTS.md (and dev/bench/chart.py dev/bench/throughput.png).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
parts=${PARTS:-http limit scale cold verify}
venv=${BENCH_VENV:-.venv-bench}
target_dir=${CARGO_TARGET_DIR:-$root/target}
bin="$target_dir/release"
mkdir -p dev/bench/results

echo "make bench: release build (cargo build --release -p bench; -p hookledger-handlers --bin receiver)" >&2
nice -n 5 cargo build --release -p bench && nice -n 5 cargo build --release -p hookledger-handlers --bin receiver

want() { [[ " $parts " == *" $1 "* ]]; }
durable() { HOOKLEDGER_PG_DURABLE=1 scripts/with-postgres.sh "$@"; }

# http and limit share one cluster (pg_stat_statements loaded for the per-event counts): the
# receiver, the peer and pgbench (a)/(b)/(c) on the same database, schema and settings. scale
# grows a ledger to 10M rows, and cold starts receivers: each gets its own cluster.
stats_options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all -c pg_stat_statements.track_utility=on"
shared_parts=()
want http && shared_parts+=(http)
want limit && shared_parts+=(limit)
if [ "${#shared_parts[@]}" -gt 0 ]; then
  echo "make bench: part(s) ${shared_parts[*]} on one throwaway PostgreSQL" >&2
  HOOKLEDGER_PG_DURABLE=1 HOOKLEDGER_PG_OPTIONS="$stats_options" scripts/with-postgres.sh \
    env BENCH_SHARED_PARTS="${shared_parts[*]}" bash -c '
      set -euo pipefail
      if [[ " $BENCH_SHARED_PARTS " == *" http "* ]]; then
        echo "make bench: part http (bench-http: receiver and peer over HTTP)" >&2
        "'"$bin"'/bench-http" --serve-bin "'"$bin"'/bench-serve" --uvicorn "'"$venv"'/bin/uvicorn" '"${BENCH_HTTP_ARGS:-}"'
      fi
      if [[ " $BENCH_SHARED_PARTS " == *" limit "* ]]; then
        echo "make bench: part limit (bench-limit limit: pgbench (a)/(b)/(c), database work per event)" >&2
        "'"$bin"'/bench-limit" limit '"${BENCH_LIMIT_ARGS:-}"' >/dev/null
      fi'
fi
if want scale; then
  echo "make bench: part scale (bench-limit scale: claim latency at 10k, 1M, 10M rows)" >&2
  durable "$bin/bench-limit" scale ${BENCH_SCALE_ARGS:-} >/dev/null
fi
if want cold; then
  echo "make bench: part cold (bench-cold: cold start, RSS, zip size)" >&2
  durable "$bin/bench-cold" ${BENCH_COLD_ARGS:-}
fi

# After http: its CPU per delivery is the base of verify's "share of the delivery's CPU".
if want verify; then
  echo "make bench: part verify (bench-verify: signature verification per algorithm, no database)" >&2
  "$bin/bench-verify" ${BENCH_VERIFY_ARGS:-} >/dev/null
fi

if [ -x "$venv/bin/python" ]; then
  "$venv/bin/python" dev/bench/chart.py dev/bench/results dev/bench/throughput.png || \
    echo "make bench: chart.py failed; RESULTS.md says so" >&2
fi
"$bin/bench-report" --results dev/bench/results --out dev/bench/RESULTS.md
echo "make bench: results in dev/bench/RESULTS.md (parts: dev/bench/results/*.json, *.md; chart: dev/bench/throughput.png)"
