# Functions for scripts/demo.sh, kept apart so the tests can run them (tests/tests/api/scripts.rs).
# Source it; it sets no shell options of its own.

# demo_target_dir: prints the directory cargo builds this workspace into. It is `target/` only by
# default: CARGO_TARGET_DIR, CARGO_BUILD_TARGET_DIR or a .cargo/config.toml `build.target-dir`
# move it, so ask cargo (`cargo metadata`, field `target_directory`).
demo_target_dir() {
  cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

# demo_sources_file SCRATCH: prints the path of the sources JSON file the functions are to read
# (as HOOKLEDGER_SOURCES_FILE). With HOOKLEDGER_SOURCES set, its value is written to SCRATCH (a
# path in a folder the caller made and removes on exit; the file is owner-only, it holds
# secrets) and SCRATCH is printed: the JSON never goes through
# cargo lambda's --env-var, which splits values on commas (and every sources array has one).
# Else HOOKLEDGER_SOURCES_FILE, else events/sources.local.json, as an absolute path.
# Fails when both variables are set (as the functions do) or the file does not exist.
demo_sources_file() {
  local scratch=$1 file
  if [ -n "${HOOKLEDGER_SOURCES:-}" ] && [ -n "${HOOKLEDGER_SOURCES_FILE:-}" ]; then
    echo "both HOOKLEDGER_SOURCES and HOOKLEDGER_SOURCES_FILE are set: set only one" >&2
    return 1
  fi
  if [ -n "${HOOKLEDGER_SOURCES:-}" ]; then
    (umask 077 && printf '%s' "$HOOKLEDGER_SOURCES" >"$scratch")
    echo "$scratch"
    return 0
  fi
  file=${HOOKLEDGER_SOURCES_FILE:-events/sources.local.json}
  if [ ! -f "$file" ]; then
    echo "sources file not found: $file" >&2
    return 1
  fi
  realpath "$file"
}

# demo_env_file OUT NAME=VALUE...: writes the emulator's environment to OUT, for
# `cargo lambda watch --env-file OUT` (cargo lambda's --env-var splits on commas, so a
# RUST_LOG=info,shared=debug or a multi-host DATABASE_URL would break there too).
# Values are single-quoted, the format's only literal quoting; the format cannot carry a single
# quote, a newline, a literal backslash-n or an empty value, so those are refused by name. A
# pair written NAME?=VALUE is optional: left out when VALUE is empty.
demo_env_file() {
  local out=$1 pair name value
  shift
  : >"$out"
  chmod 600 "$out"
  for pair in "$@"; do
    name=${pair%%=*}
    value=${pair#*=}
    case "$name" in
      *\?)
        # NAME?=VALUE: optional, left out when empty.
        name=${name%\?}
        [ -n "$value" ] || continue
        ;;
    esac
    if [ -z "$value" ]; then
      echo "$name is empty: the emulator's environment cannot pass an empty value" >&2
      return 1
    fi
    case "$value" in
      *"'"* | *$'\n'* | *'\n'*)
        echo "$name holds a single quote, a newline or a backslash-n: cargo lambda's env file cannot pass it" >&2
        return 1
        ;;
    esac
    printf "%s='%s'\n" "$name" "$value" >>"$out"
  done
}

# demo_forward_target SOURCES_FILE: prints "PORT SECRET" of the first `forward` target in the
# sources whose URL is on this machine (127.0.0.1 or localhost: the demo's acme-forward source),
# for the local endpoint the demo starts; prints nothing when there is none.
demo_forward_target() {
  python3 - "$1" <<'PY'
import json, sys, urllib.parse
for source in json.load(open(sys.argv[1], encoding="utf-8")):
    for target in source.get("targets") or []:
        if target.get("type") != "forward":
            continue
        url = urllib.parse.urlsplit(target["url"])
        if url.hostname in ("127.0.0.1", "localhost"):
            print(url.port or 80, target["secret"])
            sys.exit(0)
PY
}

# demo_wait_started PID LOG PATTERN: waits up to 10 s, while PID runs, for a line of LOG matching
# PATTERN (grep -E), and prints it. Fails, with LOG on stderr and PID killed, when PID exits first
# or the time runs out.
demo_wait_started() {
  local pid=$1 log=$2 pattern=$3 line
  for _ in $(seq 1 100); do
    line=$(grep -m1 -E "$pattern" "$log" 2>/dev/null || true)
    if [ -n "$line" ]; then
      printf '%s\n' "$line"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  kill "$pid" 2>/dev/null || true
  return 1
}

# demo_forward_endpoint PORT SECRET LOG: starts tests/interop/forward_server.py (the official
# Standard Webhooks library verifies every request; python3 must be the tools venv's, as under
# make) on 127.0.0.1:PORT in its own process group, its output in LOG (one line per request:
# "verified webhook-id=..." or "NOT VERIFIED webhook-id=..."), and prints its pid once it
# listens (a short JSON body, such as a transformed forward's, ends its line). Fails when it does
# not start.
demo_forward_endpoint() {
  local port=$1 secret=$2 log=$3 pid
  HOOKLEDGER_FORWARD_SECRET="$secret" setsid python3 tests/interop/forward_server.py \
    --port "$port" --show-json >"$log" 2>&1 &
  pid=$!
  if demo_wait_started "$pid" "$log" '"port"' >/dev/null; then
    echo "$pid"
    return 0
  fi
  echo "the forward endpoint did not start on port $port (run through make: it needs the tools venv's standardwebhooks)" >&2
  return 1
}

# demo_forward_report LOG: prints what the forward endpoint received, one indented line per
# request (its first line, the port, left out), or says that nothing arrived.
demo_forward_report() {
  local lines
  lines=$(grep -v '^{"port"' "$1" || true)
  if [ -z "$lines" ]; then
    echo "  (nothing received: the worker dispatches outbox messages after commit; see its log)"
  else
    printf '%s\n' "$lines" | sed 's/^/  /'
  fi
}

# demo_console HOOKLEDGER PORT LOG: starts `HOOKLEDGER console` (the operator CLI's ledger
# console) on 127.0.0.1:PORT in its own process group, with this shell's environment (the
# database, the sources, the worker's doorbell), its output in LOG (a private file: its first
# line holds the access token), and prints "PID URL" once it has printed its URL
# (http://127.0.0.1:PORT/?token=...). Fails when it does not start.
demo_console() {
  local hookledger=$1 port=$2 log=$3 pid line
  (umask 077 && : >"$log")
  setsid "$hookledger" console --bind "127.0.0.1:$port" >"$log" 2>&1 &
  pid=$!
  if line=$(demo_wait_started "$pid" "$log" '^hookledger console: '); then
    echo "$pid ${line#hookledger console: }"
    return 0
  fi
  echo "hookledger console did not start on 127.0.0.1:$port" >&2
  return 1
}
