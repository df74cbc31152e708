#!/usr/bin/env bash
# Which OpenSSL local builds link. The `openssl` crate's `vendored` feature compiles OpenSSL
# from source (static, what Lambda needs: `make package`, `sam build` and the benchmarks keep
# it); that C build is about 120 s of a cold build on 2 cores, two thirds of `make demo`'s
# (`cargo build --timings`, issue 29). `make demo`, `make run` and `make test` link the
# distribution's OpenSSL instead when its development files are installed: openssl-sys reads
# `OPENSSL_NO_VENDOR=1` and finds it with pkg-config.
#
#   scripts/openssl.sh install   install Debian's libssl-dev and pkg-config with apt-get when
#                                missing; best effort: without them, builds stay vendored
#   scripts/openssl.sh env       print `export OPENSSL_NO_VENDOR=1` when pkg-config finds
#                                OpenSSL and OPENSSL_NO_VENDOR is not set already (`eval` it)
set -euo pipefail

found() { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists openssl 2>/dev/null; }

install() {
  if found; then return 0; fi
  echo "OpenSSL's development files not found: installing Debian's libssl-dev and pkg-config with apt-get (else the build compiles OpenSSL itself, about 2 minutes more)" >&2
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends libssl-dev pkg-config >/dev/null; }; then
    echo "libssl-dev could not be installed: local builds compile the vendored OpenSSL" >&2
  fi
}

env_line() {
  if [ -z "${OPENSSL_NO_VENDOR:-}" ] && found; then echo "export OPENSSL_NO_VENDOR=1"; fi
}

case "${1:-}" in
  install) install ;;
  env) env_line ;;
  *) echo "usage: $0 install|env" >&2; exit 2 ;;
esac
