#!/usr/bin/env bash
# make docs: builds the book in docs/ (docs/book.toml, docs/SUMMARY.md) with mdBook into
# target/book/ (open target/book/index.html). Not part of `make test`: the first run installs
# mdBook, and `make test` checks the book's links and its summary without it
# (tests/tests/api/docs.rs).
#
# Installs mdBook (pinned, from crates.io, without its `serve` and `watch` features) into
# .tools/mdbook when missing, as scripts/fuzz.sh does for cargo-fuzz.
#
# Environment: DOCS_OUT (default target/book; a relative path is taken from the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

MDBOOK_VERSION=0.5.4
tools=$root/.tools/mdbook
out=${DOCS_OUT:-target/book}
case $out in /*) ;; *) out=$root/$out ;; esac

started=$(date +%s)
install_secs=0
if ! "$tools/bin/mdbook" --version 2>/dev/null | grep -q " v$MDBOOK_VERSION\$"; then
  echo "== installing mdbook $MDBOOK_VERSION into .tools/mdbook (once; a few minutes on 2 cores)"
  nice -n 5 cargo install mdbook --locked --version "$MDBOOK_VERSION" \
    --no-default-features --features search --root "$tools" --quiet
  install_secs=$(( $(date +%s) - started ))
fi

echo "== mdbook build docs -> $out"
build_started=$(date +%s)
"$tools/bin/mdbook" build docs --dest-dir "$out"
build_secs=$(( $(date +%s) - build_started ))
echo "== make docs: $out/index.html (install ${install_secs}s, build ${build_secs}s)"
