#!/usr/bin/env bash
# `make demo` / `make run`: our functions under cargo lambda's emulator, on the PostgreSQL at
# DATABASE_URL (make starts a throwaway one), with sources.json.
#
#   scripts/run.sh demo   deliver events/charge-refunded.json twice, print the answers and the
#                         ledger row, stop
#   scripts/run.sh run    keep serving until Ctrl-C
#
# The functions' log is kept in .hookledger/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-demo}
port=${PORT:-9000}
export HOOKLEDGER_SOURCES_FILE=$PWD/sources.json
mkdir -p .hookledger/logs
log=.hookledger/logs/$mode-$(date -u +%Y%m%dT%H%M%SZ).log

cargo build --quiet --bins
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
"$target/debug/hookledger" migrate
"$target/debug/hookledger" check-config

watch_pid=""
cleanup() {
  if [ -n "$watch_pid" ]; then kill -TERM -- "-$watch_pid" 2>/dev/null || true; wait "$watch_pid" 2>/dev/null || true; fi
  echo "== the functions' log: $log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
setsid cargo lambda watch --quiet --ignore-changes -A 127.0.0.1 -P "$port" >"$log" 2>&1 &
watch_pid=$!
for _ in $(seq 1 600); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  kill -0 "$watch_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.2
done
base="http://127.0.0.1:$port/lambda-url/receiver/webhooks"
if [ "$mode" = run ]; then
  echo "== serving $base/{source} (Ctrl-C stops; log: $log)"
  wait "$watch_pid"
  exit 0
fi

# Stripe's signature: Stripe-Signature: t=<unix seconds>,v1=hex(HMAC-SHA256(secret, "<t>.<body>")).
deliver() {
  python3 - "$base/stripe" events/charge-refunded.json <<'PY'
import hashlib, hmac, json, sys, time, urllib.request, urllib.error
url, path = sys.argv[1], sys.argv[2]
body = open(path, "rb").read()
secret = json.load(open("sources.json"))[0]["secrets"][0]
t = str(int(time.time()))
sig = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
request = urllib.request.Request(url, data=body, method="POST", headers={
    "Content-Type": "application/json", "Stripe-Signature": f"t={t},v1={sig}"})
try:
    with urllib.request.urlopen(request, timeout=60) as r:
        status, text, replayed = r.status, r.read().decode(), r.headers.get("Idempotent-Replayed")
except urllib.error.HTTPError as e:
    status, text, replayed = e.code, e.read().decode(), e.headers.get("Idempotent-Replayed")
print(f"  {status} {text}" + (" [Idempotent-Replayed]" if replayed else ""))
PY
}
echo "== charge.refunded, delivered"
deliver
echo "== the same delivery again (the provider's retry)"
deliver
echo "== the ledger"
"$target/debug/hookledger" inspect --source stripe evt_demo_refund_1 | sed 's/^/  /'
