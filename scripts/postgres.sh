#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the demo and the tests.
#
#   scripts/postgres.sh install          install the server binaries with apt-get if missing
#   scripts/postgres.sh start DIR        initdb + start a cluster in DIR; prints DATABASE_URL
#   scripts/postgres.sh stop DIR         stop it and delete DIR
#
# The cluster listens on 127.0.0.1 on a free port, trusts local connections, and runs as the
# `postgres` user when invoked as root (initdb refuses root). fsync is off: it is throwaway.
set -euo pipefail

pg_bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
  return 1
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

install_server() {
  if pg_bindir >/dev/null; then return 0; fi
  echo "PostgreSQL server binaries not found: installing them with apt-get" >&2
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
  pg_bindir >/dev/null || { echo "PostgreSQL install failed" >&2; exit 1; }
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local dir=$1 bin port
  install_server
  bin=$(pg_bindir)
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    chown postgres "$dir"
  fi
  chmod 700 "$dir"
  port=$(free_port)
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

stop() {
  local dir=$1 bin
  bin=$(pg_bindir) || true
  if [ -n "${bin:-}" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  install) install_server ;;
  start) start "$2" ;;
  stop) stop "$2" ;;
  *) echo "usage: $0 install | start DIR | stop DIR" >&2; exit 2 ;;
esac
