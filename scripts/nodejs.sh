#!/usr/bin/env bash
# Node.js and npm for the interop tests' Node libraries (tests/interop/node).
#
#   scripts/nodejs.sh install   install Debian's nodejs and npm with apt-get when either is missing
set -euo pipefail

install() {
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then return 0; fi
  echo "node or npm not found: installing Debian's nodejs and npm with apt-get" >&2
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >/dev/null
  command -v node >/dev/null && command -v npm >/dev/null || { echo "nodejs/npm install failed" >&2; exit 1; }
}

case "${1:-}" in
  install) install ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac
