#!/usr/bin/env bash
# `make demo` / `make run`: the receiver under cargo-lambda's emulator on PostgreSQL.
#
#   scripts/demo.sh demo   deliver events/demo-plan.json, print replies and the ledger, stop
#                          (with CONSOLE=1, then serve the ledger console on that ledger until
#                          interrupted)
#   scripts/demo.sh run    keep serving at http://127.0.0.1:$PORT/lambda-url/receiver/webhooks/{source}
#                          (and the worker at .../lambda-url/worker, rung by the receiver's doorbell),
#                          and the ledger console (hookledger console) at
#                          http://127.0.0.1:$CONSOLE_PORT/?token=... (printed; CONSOLE_PORT=8470)
#
# Uses DATABASE_URL when set (migrating it), else a throwaway cluster removed on exit.
# Sources: HOOKLEDGER_SOURCES or HOOKLEDGER_SOURCES_FILE when set, else events/sources.local.json.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/demo-lib.sh
. scripts/demo-lib.sh
# The distribution's OpenSSL instead of compiling the vendored one, when installed
# (scripts/openssl.sh: about 2 minutes less of a cold build on 2 cores).
eval "$(scripts/openssl.sh env)"
mode=${1:-demo}
port=${PORT:-9000}
console_port=${CONSOLE_PORT:-8470}
serve_console=0
if [ "$mode" = run ] || [ "${CONSOLE:-0}" = 1 ]; then serve_console=1; fi

cluster=""
watch_pid=""
forward_pid=""
console_pid=""
log=""
scratch=""
cleaned=0
cleanup() {
  # Runs once, and is not interrupted by the repeated signals a process group gets.
  [ "$cleaned" = 1 ] && return
  cleaned=1
  trap '' INT TERM
  if [ -n "$watch_pid" ]; then
    kill -TERM -- "-$watch_pid" 2>/dev/null || kill -TERM "$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
  fi
  if [ -n "$forward_pid" ]; then
    kill -TERM -- "-$forward_pid" 2>/dev/null || kill -TERM "$forward_pid" 2>/dev/null || true
    wait "$forward_pid" 2>/dev/null || true
  fi
  if [ -n "$console_pid" ]; then
    kill -TERM -- "-$console_pid" 2>/dev/null || kill -TERM "$console_pid" 2>/dev/null || true
    wait "$console_pid" 2>/dev/null || true
  fi
  if [ -n "$cluster" ]; then scripts/postgres.sh stop "$cluster"; fi
  if [ -n "$log" ] && [ -s "$log" ]; then echo "== the functions' log is kept: $log" >&2; fi
  if [ -n "$scratch" ]; then rm -rf "$scratch"; fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

command -v cargo-lambda >/dev/null || { echo "cargo-lambda not found: run through make ($0 expects .venv-tools on PATH)" >&2; exit 1; }

# The sources and the emulator's environment go through files in a private scratch folder (they
# hold secrets), removed on exit: cargo lambda's --env-var splits its values on commas.
scratch=$(mktemp -d /tmp/hookledger-demo.XXXXXX)
sources_file=$(demo_sources_file "$scratch/sources.json")
# The functions inherit this shell's environment too: leave them one way to the sources.
unset HOOKLEDGER_SOURCES HOOKLEDGER_SOURCES_FILE HOOKLEDGER_SOURCES_SECRET_ARN
# The example handlers run only where asked (HOOKLEDGER_EXAMPLES: source names): on the demo's
# own Stripe sources when the sources are the demo's, never on yours unless you name them.
demo_sources=0
if [ "$sources_file" = "$(realpath events/sources.local.json)" ]; then demo_sources=1; fi
if [ -z "${HOOKLEDGER_EXAMPLES+set}" ] && [ "$demo_sources" = 1 ]; then
  HOOKLEDGER_EXAMPLES=stripe,stripe-deferred
fi
export HOOKLEDGER_EXAMPLES=${HOOKLEDGER_EXAMPLES:-}
if [ -n "$HOOKLEDGER_EXAMPLES" ]; then
  echo "== example handlers on: $HOOKLEDGER_EXAMPLES (HOOKLEDGER_EXAMPLES)"
else
  echo "== example handlers off: your handlers alone (HOOKLEDGER_EXAMPLES=name,... turns them on for those sources)"
fi

if [ -z "${DATABASE_URL:-}" ]; then
  cluster=$(mktemp -d /tmp/hookledger-pg.XXXXXX)
  chmod 755 "$cluster"
  DATABASE_URL=$(scripts/postgres.sh start "$cluster")
  echo "== throwaway PostgreSQL: $DATABASE_URL"
else
  echo "== using DATABASE_URL from the environment"
fi
export DATABASE_URL

# The demo runs the example handlers and migrates their tables (a plain build has neither).
features=hookledger-handlers/examples
echo "== building (the first build takes a few minutes on 2 cores; later runs take seconds)"
cargo build --features "$features" \
  --bin receiver --bin worker --bin sweeper --bin auditor --bin hookledger --bin hookledger-dev
hookledger=$(demo_target_dir)/debug/hookledger
dev=$(demo_target_dir)/debug/hookledger-dev
"$hookledger" migrate
# The functions read their configuration at their first invocation under the emulator; check it
# now, with the same code, so a bad source fails here with its message instead of a hung request.
HOOKLEDGER_SOURCES_FILE="$sources_file" "$hookledger" check-config >"$scratch/check-config.txt"
if [ "$demo_sources" = 1 ]; then
  # Most of the demo's sources only record their events, on purpose: one line instead of a
  # warning each (with your sources, each such warning stands).
  grep -v '^warning: source ".*" has no handler and no built-in target' "$scratch/check-config.txt" || true
  recording=$(sed -n 's/^warning: source "\(.*\)" has no handler and no built-in target.*/\1/p' "$scratch/check-config.txt" | paste -sd, - | sed 's/,/, /g')
  if [ -n "$recording" ]; then
    echo "(the demo's sources $recording only record their events: no handler, no target)"
  fi
else
  cat "$scratch/check-config.txt"
fi
# The same for the functions' start-up warnings (shared::coverage), with the demo's sources only.
function_log=${RUST_LOG:-info}
if [ "$demo_sources" = 1 ] && [ -z "${RUST_LOG:-}" ]; then function_log="info,shared::coverage=error"; fi

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "port $port is in use: set PORT=... to pick another" >&2
  exit 1
fi
if [ "$serve_console" = 1 ] && (exec 3<>"/dev/tcp/127.0.0.1/$console_port") 2>/dev/null; then
  echo "port $console_port (the console's) is in use: set CONSOLE_PORT=... to pick another" >&2
  exit 1
fi

# The ledger console (hookledger console) over the same database and sources; its re-drive rings
# the worker through the emulator, as the receiver's doorbell does. Sets console_pid, console_url.
start_console() {
  HOOKLEDGER_SOURCES_FILE="$sources_file" HOOKLEDGER_WORKER_FUNCTION=worker \
    AWS_ENDPOINT_URL_LAMBDA="http://127.0.0.1:$port" AWS_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_EC2_METADATA_DISABLED=true \
    demo_console "$hookledger" "$console_port" "$scratch/console.log" >"$scratch/console.started"
  read -r console_pid console_url <"$scratch/console.started"
}

# The forward target's endpoint (the acme-forward source in events/sources.local.json): a local
# service that verifies each delivery's Standard Webhooks signature with the official library.
forward_log="$scratch/forward.log"
read -r forward_port forward_secret < <(demo_forward_target "$sources_file") || true
if [ -n "${forward_port:-}" ]; then
  if (exec 3<>"/dev/tcp/127.0.0.1/$forward_port") 2>/dev/null; then
    # Something listens there already: your own receiver (the book's forward_receiver.py,
    # say). Forwards go to it; the demo starts no endpoint of its own.
    echo "== port $forward_port (the first local forward target in $sources_file) is in use: forwards go to what listens there; no demo endpoint started"
  else
    forward_pid=$(demo_forward_endpoint "$forward_port" "$forward_secret" "$forward_log")
    echo "== forward endpoint on 127.0.0.1:$forward_port (verifies the Standard Webhooks signature)"
  fi
fi
unset forward_secret

echo "== starting the receiver: cargo lambda watch on 127.0.0.1:$port"
# Kept after the run (Ctrl-C included): .hookledger/logs/, one file per run, newest last.
mkdir -p .hookledger/logs
log=.hookledger/logs/$mode-$(date -u +%Y%m%dT%H%M%SZ).log
: >"$log"
# Both functions run under the emulator. The receiver's doorbell rings the worker through the
# emulator's Lambda Invoke API (dummy credentials: nothing leaves this machine).
demo_env_file "$scratch/emulator.env" \
  "DATABASE_URL=$DATABASE_URL" "HOOKLEDGER_SOURCES_FILE=$sources_file" \
  "HOOKLEDGER_WORKER_FUNCTION=worker" "AWS_ENDPOINT_URL_LAMBDA=http://127.0.0.1:$port" \
  "AWS_REGION=us-east-1" "AWS_ACCESS_KEY_ID=local" "AWS_SECRET_ACCESS_KEY=local" \
  "AWS_EC2_METADATA_DISABLED=true" "RUST_LOG=$function_log" \
  "HOOKLEDGER_EXAMPLES?=$HOOKLEDGER_EXAMPLES"
# RUST_LOG reaches the functions through the env file only: cargo lambda itself would turn
# verbose with it and print the functions' environment (the database URL) and its metadata.
setsid env -u RUST_LOG cargo lambda watch --quiet --ignore-changes -A 127.0.0.1 -P "$port" \
  --features "$features" --env-file "$scratch/emulator.env" >"$log" 2>&1 &
watch_pid=$!
for _ in $(seq 1 600); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  kill -0 "$watch_pid" 2>/dev/null || { cat "$log" >&2; echo "cargo lambda watch exited" >&2; exit 1; }
  sleep 0.2
done
base="http://127.0.0.1:$port/lambda-url/receiver"

if [ "$mode" = run ]; then
  start_console
  echo "== console: $console_url   (the ledger in the browser: hookledger console)"
  echo "== serving $base/webhooks/{source}   (log: $log; Ctrl-C stops)"
  # --pid: the tail ends with the emulator (a background job ignores Ctrl-C's SIGINT).
  tail --pid="$watch_pid" -f "$log" ${forward_pid:+"$forward_log"} &
  wait "$watch_pid"
  exit 0
fi

# Start the worker once, so the doorbell's first ring does not wait for its cold start (the
# emulator runs an asynchronous invoke synchronously).
cargo lambda invoke worker -A 127.0.0.1 -P "$port" --data-file events/worker/schedule.json >/dev/null

echo "== delivering events/demo-plan.json to $base/webhooks/{source}"
"$dev" deliver events/demo-plan.json --url "$base"
echo
echo "== the worker's scheduled run (the doorbell already drained the deferred event)"
cargo lambda invoke worker -A 127.0.0.1 -P "$port" --data-file events/worker/schedule.json
echo
echo "== worker runs (one log line per drain)"
grep '"message":"drain"' "$log" | sed 's/^/  /' || true
echo
if [ -n "$forward_pid" ]; then
  echo "== the forward endpoint (one line per request: verified or not, with its webhook-id)"
  demo_forward_report "$forward_log"
  echo
fi
echo "== the sweeper's scheduled run (keys expire after their source's retention: none is that old yet)"
cargo lambda invoke sweeper -A 127.0.0.1 -P "$port" --data-file events/sweeper/schedule.json
echo
echo "== the auditor's scheduled run (stuck claims, dead letters, backlog, retention, quiet sources)"
# The report is one JSON object (what the alarms' metrics come from); print a line per source.
cargo lambda invoke auditor -A 127.0.0.1 -P "$port" --data-file events/auditor/schedule.json |
  python3 -c '
import json, sys
report = json.load(sys.stdin)
for name, s in report["sources"].items():
    print("  %-16s stuck %d, backlog %d, dead %d (%d new), past retention %d, oldest key %s s%s" % (
        name, s["stuck_claims"], s["backlog_due"], s["dead_letters"], s["dead_letters_new"],
        s["past_retention"], "-" if s["oldest_key_age"] is None else s["oldest_key_age"],
        ", QUIET" if s["quiet"] else ""))
print("  sessions idle in a transaction: %d" % report["idle_in_transaction"]["sessions"])
'
echo
echo "== the operator's view of one event (hookledger inspect; the runbook, docs/operations/runbook.md, has the rest)"
HOOKLEDGER_SOURCES_FILE="$sources_file" "$hookledger" inspect --source stripe evt_1QhookledgerDemo0001 |
  sed 's/^/  /'
echo
echo "== ledger"
"$dev" ledger
echo
echo "== receiver log (one line per delivery)"
grep '"message":"delivery"' "$log" | sed 's/^/  /' || true
echo
echo "== the ledger console on this ledger (hookledger console)"
if [ "$serve_console" = 1 ]; then
  start_console
  stop_note="Ctrl-C stops it"
  [ -z "$cluster" ] || stop_note="$stop_note and removes the throwaway database"
  echo "  $console_url   ($stop_note)"
  wait "$console_pid"
elif [ -n "$cluster" ]; then
  echo "  this run's throwaway database is removed now: \`make demo CONSOLE=1\` ends by serving the"
  echo "  console on the demo's ledger until Ctrl-C (\`make run\` serves it beside the receiver)"
else
  case "$sources_file" in
    "$scratch"/*) sources_hint="with the same HOOKLEDGER_SOURCES" ;;
    *) sources_hint="HOOKLEDGER_SOURCES_FILE=$sources_file" ;;
  esac
  echo "  with this DATABASE_URL: $sources_hint $hookledger console"
fi
