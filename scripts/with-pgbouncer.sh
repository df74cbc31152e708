#!/usr/bin/env bash
# Runs a command with pgbouncer in transaction mode in front of the PostgreSQL at DATABASE_URL
# (the throwaway cluster of scripts/with-postgres.sh), and stops it afterwards, whatever the
# command's outcome. Exports HOOKLEDGER_TEST_POOLER_URL: the same server through pgbouncer, a
# postgres:// URL whose database name can be replaced like DATABASE_URL's (every database is
# reachable through it: a wildcard entry).
#
# The configuration is what a production transaction-mode pooler looks like: pool_mode =
# transaction, a small server pool per database, trust auth to the trust cluster, and no
# `ignore_startup_parameters`, so a client that sends start-up `options` is refused loudly
# ("unsupported startup parameter: options") instead of losing its timeouts silently.
# With KEEP_POOLER_URL=1 and HOOKLEDGER_TEST_POOLER_URL already set, starts nothing.
set -euo pipefail
if [ "${KEEP_POOLER_URL:-0}" = 1 ] && [ -n "${HOOKLEDGER_TEST_POOLER_URL:-}" ]; then
  exec "$@"
fi
[ -n "${DATABASE_URL:-}" ] || { echo "DATABASE_URL must be set (run through scripts/with-postgres.sh)" >&2; exit 1; }
pgbouncer=$(command -v pgbouncer || true)
[ -n "$pgbouncer" ] || [ ! -x /usr/sbin/pgbouncer ] || pgbouncer=/usr/sbin/pgbouncer
[ -n "$pgbouncer" ] || { echo "pgbouncer not found: run scripts/postgres.sh install (make does)" >&2; exit 1; }

# host, port and user of the server, from DATABASE_URL.
read -r pg_host pg_port pg_user < <(python3 -c '
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(u.hostname or "127.0.0.1", u.port or 5432, urllib.parse.unquote(u.username or "postgres"))
' "$DATABASE_URL")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

dir=$(mktemp -d /tmp/hookledger-pgbouncer.XXXXXX)
chmod 755 "$dir"
printf '"%s" ""\n' "$pg_user" >"$dir/userlist.txt"
cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$pg_host port=$pg_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = $pg_user
pool_mode = transaction
default_pool_size = 20
max_client_conn = 1000
; Per-test databases come and go: give their idle server connections back soon.
server_idle_timeout = 10
autodb_idle_timeout = 30
EOF

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  chown -R postgres "$dir"
fi

as_owner "$pgbouncer" "$dir/pgbouncer.ini" >"$dir/stdout.log" 2>&1 &
launcher=$!
stop() {
  local pid
  pid=$(cat "$dir/pgbouncer.pid" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    # SIGTERM is an immediate shutdown in 1.18; later versions first wait for clients.
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  kill "$launcher" 2>/dev/null || true
  wait "$launcher" 2>/dev/null || true
  rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT TERM

psql=""
for candidate in $(ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V -r) $(command -v psql || true); do
  if [ -x "$candidate" ]; then psql=$candidate; break; fi
done
url="postgres://$pg_user@127.0.0.1:$port/postgres?sslmode=disable"
ready=0
for _ in $(seq 1 150); do
  if ! kill -0 "$launcher" 2>/dev/null; then break; fi
  if [ -n "$psql" ]; then
    # A real query through the wildcard entry: pgbouncer is up and reaches the server.
    if "$psql" "$url" -XAtqc 'SELECT 1' >/dev/null 2>&1; then ready=1; break; fi
  elif python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1).close()" 2>/dev/null; then
    ready=1; break
  fi
  sleep 0.2
done
if [ "$ready" != 1 ]; then
  cat "$dir/stdout.log" "$dir/pgbouncer.log" >&2 2>/dev/null || true
  echo "pgbouncer did not start" >&2
  exit 1
fi
export HOOKLEDGER_TEST_POOLER_URL=$url
echo "pgbouncer $("$pgbouncer" --version | head -1 | awk '{print $2}') (transaction mode) at $url" >&2
"$@"
