#!/usr/bin/env bash
# make chaos: builds the chaos binaries (chaos, chaos-receiver, chaos-worker; the dev profile by
# default, CHAOS_PROFILE=release for an optimised build), then runs every scenario (or
# CHAOS_ARGS, e.g. CHAOS_ARGS="--scenario retry_storm --seed 42"; `chaos --help`) against its
# own throwaway durable PostgreSQL, loopback only. Writes RELIABILITY.md at the repository root
# and <target dir>/chaos/<scenario>.json (the processes' logs in <target dir>/chaos/logs/).
# The run is bounded: CHAOS_TIMEOUT_SECS (default 900) after the build it is interrupted (the
# cluster is stopped on the way out) and fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target_dir=${CARGO_TARGET_DIR:-$root/target}
profile=${CHAOS_PROFILE:-dev}
if [ "$profile" = release ]; then
  echo "make chaos: cargo build --locked --release -p chaos --bins" >&2
  nice -n 5 cargo build --locked --release -p chaos --bins
  bin="$target_dir/release"
else
  echo "make chaos: cargo build --locked -p chaos --bins (dev profile; CHAOS_PROFILE=release for an optimised one)" >&2
  nice -n 5 cargo build --locked -p chaos --bins
  bin="$target_dir/debug"
fi
scripts/postgres.sh install
# shellcheck disable=SC2086 # CHAOS_ARGS is a list of options
exec timeout -s INT -k 30 "${CHAOS_TIMEOUT_SECS:-900}" \
  "$bin/chaos" --repo "$root" --out "$target_dir/chaos" --report "$root/RELIABILITY.md" ${CHAOS_ARGS:-}
