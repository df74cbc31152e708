#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the demo and the tests.
#
#   scripts/postgres.sh install          install the server binaries and pgbouncer (the tests run
#                                        the receive path through it too) with apt-get if missing
#   scripts/postgres.sh start DIR        initdb + start a cluster in DIR; prints DATABASE_URL
#                                        (TLS is on too, with a throwaway CA in DIR/tls/ca.crt and a
#                                        server certificate for localhost and 127.0.0.1)
#   scripts/postgres.sh stop DIR         stop it and delete DIR
#
# The cluster listens on 127.0.0.1 on a free port, trusts local connections, and runs as the
# `postgres` user when invoked as root (initdb refuses root). fsync is off: it is throwaway.
# HOOKLEDGER_PG_DURABLE=1 keeps PostgreSQL's own durability defaults instead (fsync,
# synchronous_commit and full_page_writes on: what `make bench-sweep` measures against).
# HOOKLEDGER_PG_OPTIONS appends extra server options to the start command line, after the
# defaults (so it can override them), e.g. for `make bench`'s limit part:
#   HOOKLEDGER_PG_OPTIONS="-c shared_preload_libraries=pg_stat_statements
#     -c pg_stat_statements.track=all -c pg_stat_statements.track_utility=on"
# Unset or empty, nothing changes.
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
  local packages=()
  pg_bindir >/dev/null || packages+=(postgresql)
  command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || packages+=(pgbouncer)
  [ "${#packages[@]}" -gt 0 ] || return 0
  echo "${packages[*]} not found: installing with apt-get" >&2
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
  pg_bindir >/dev/null || { echo "PostgreSQL install failed" >&2; exit 1; }
  command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] \
    || { echo "pgbouncer install failed" >&2; exit 1; }
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

make_certificates() {
  local tls=$1
  mkdir -p "$tls"
  (
    cd "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=hookledger test CA" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile san.ext -out server.crt 2>/dev/null
    chmod 600 server.key
  )
}

start() {
  local dir=$1 bin port ssl_opts=""
  install_server
  bin=$(pg_bindir)
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    chown postgres "$dir"
  fi
  chmod 700 "$dir"
  port=$(free_port)
  if command -v openssl >/dev/null 2>&1; then
    make_certificates "$dir/tls"
    ssl_opts="-c ssl=on -c ssl_cert_file=$dir/tls/server.crt -c ssl_key_file=$dir/tls/server.key"
  fi
  if [ "$(id -u)" = 0 ]; then chown -R postgres "$dir"; fi
  local durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  [ "${HOOKLEDGER_PG_DURABLE:-0}" = 1 ] && durability=""
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-h 127.0.0.1 -p $port -k $dir $durability -c max_connections=300 $ssl_opts ${HOOKLEDGER_PG_OPTIONS:-}" \
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
