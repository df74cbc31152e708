#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the console's browser test (tests/tests/api/console.rs,
# driven through tests/src/browser.rs).
#
#   scripts/chromium.sh install   install Debian's chromium and chromium-driver with apt-get
#                                 (--no-install-recommends: about 26 packages) when either is
#                                 missing
set -euo pipefail

install() {
  if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then return 0; fi
  echo "chromium or chromedriver not found: installing Debian's chromium and chromium-driver with apt-get" >&2
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver >/dev/null
  [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] \
    || { echo "chromium/chromium-driver install failed" >&2; exit 1; }
}

case "${1:-}" in
  install) install ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac
