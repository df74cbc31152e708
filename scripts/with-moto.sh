#!/usr/bin/env bash
# Runs a command with a local AWS API emulator (moto server, from .venv-tools) on a free port,
# the SDK pointed at it with a region and dummy credentials, and stops it afterwards.
set -euo pipefail
moto=$(command -v moto_server || true)
[ -n "$moto" ] || { echo "moto_server not found: run through make (it installs .venv-tools)" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
log=$(mktemp /tmp/hookledger-moto.XXXXXX.log)
# Requests are recorded only while a test asks (/moto-api/recorder/start-recording), into a
# throwaway file rather than ./moto_recording.
recording=$(mktemp /tmp/hookledger-moto-recording.XXXXXX)
MOTO_RECORDER_FILEPATH="$recording" "$moto" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log" "$recording"' EXIT INT TERM
for _ in $(seq 1 150); do
  if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/moto-api/', timeout=1)" 2>/dev/null; then
    break
  fi
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; echo "moto_server exited" >&2; exit 1; }
  sleep 0.2
done
export AWS_ENDPOINT_URL_SECRETS_MANAGER="http://127.0.0.1:$port"
export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
unset AWS_PROFILE AWS_SESSION_TOKEN
export AWS_EC2_METADATA_DISABLED=true
echo "moto emulator at $AWS_ENDPOINT_URL" >&2
"$@"
