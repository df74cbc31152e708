#!/usr/bin/env bash
# Runs a command with DATABASE_URL pointing at a throwaway PostgreSQL cluster, and removes the
# cluster afterwards, whatever the command's outcome. With KEEP_DATABASE_URL=1 and DATABASE_URL
# already set, uses that server instead and starts nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${KEEP_DATABASE_URL:-0}" = 1 ] && [ -n "${DATABASE_URL:-}" ]; then
  exec "$@"
fi
dir=$(mktemp -d /tmp/hookledger-pg.XXXXXX)
chmod 755 "$dir"
trap '"$here/postgres.sh" stop "$dir"' EXIT INT TERM
DATABASE_URL=$("$here/postgres.sh" start "$dir")
export DATABASE_URL
# The cluster also speaks TLS with this CA (tests of sslmode=require and CA verification).
if [ -f "$dir/tls/ca.crt" ]; then export HOOKLEDGER_TEST_CA_FILE="$dir/tls/ca.crt"; fi
echo "throwaway PostgreSQL at ${DATABASE_URL} (data in $dir)" >&2
"$@"
