#!/usr/bin/env bash
# The whole suite: formatting, clippy, then every test against a throwaway PostgreSQL (the
# pooler tests reach it through a pgbouncer in transaction mode started in front of it).
# Fails when any step fails, when any test is ignored, when no test ran at all, and when the
# end-to-end binary ran fewer tests than tests/minimum-e2e-tests (scripts/check-test-log.sh).
# Then the secret scan of the run's complete log output (scripts/scan-test-logs.py).
# Then the handlers crate alone, without its `examples` feature (a workspace run unifies it on
# through the tests crate): neither the example handlers nor their tables may exist.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
# No incremental caches: a run from a clean clone never reuses them, and they were 4.7 GB of the
# target directory's 17 (set CARGO_INCREMENTAL=1 to keep them between your own runs).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# The free space where the build goes, first: a full disk shows up later as a linker killed by
# SIGBUS, far from its cause. A run from a clean clone writes about 4 GB there (17 GB before
# line tables only and no incremental caches).
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
mkdir -p "$target_dir"
echo "== free space for $target_dir: $(df -h --output=avail "$target_dir" | tail -1 | tr -d ' ')"
# The distribution's OpenSSL instead of compiling the vendored one, when installed
# (scripts/openssl.sh: about 2 minutes less of a cold build on 2 cores).
eval "$(scripts/openssl.sh env)"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== sam validate --lint template.yaml"
sam validate --lint --template-file template.yaml
echo "== cfn-lint template.yaml (warnings fail too)"
cfn-lint template.yaml

echo "== cargo test (throwaway PostgreSQL with TLS, pgbouncer in transaction mode, moto for Secrets Manager)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Every test's logs (the functions' JSON subscriber) and the output of the processes they spawn
# land here (tests/src/test_log.rs), for the secret scan after the run.
export HOOKLEDGER_TEST_LOG_DIR="$target_dir/test-logs/run-$$"
rm -rf "$HOOKLEDGER_TEST_LOG_DIR"
mkdir -p "$HOOKLEDGER_TEST_LOG_DIR"
set +e
scripts/with-moto.sh scripts/with-postgres.sh scripts/with-pgbouncer.sh cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

if [ "$status" != 0 ]; then
  scripts/check-test-log.sh "$log" || true
  echo "cargo test failed (exit $status)" >&2
  exit 1
fi
scripts/check-test-log.sh "$log"

echo "== secret scan of the test logs (no signing secret, API key, database password or signature value)"
python3 scripts/scan-test-logs.py "$log" "$HOOKLEDGER_TEST_LOG_DIR"
rm -rf "$HOOKLEDGER_TEST_LOG_DIR"

echo "== cargo test -p hookledger-handlers alone (no examples feature; throwaway PostgreSQL; dev/feature-align beside it keeps the dependencies' features as the workspace run built them)"
set +e
scripts/with-postgres.sh cargo test -p hookledger-handlers -p feature-align --locked --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
read -r passed failed ignored < <(awk '
  function count(word,   i, n) {
    n = 0
    for (i = 1; i < NF; i++) if ($(i + 1) ~ ("^" word)) n += $i
    return n
  }
  /^test result:/ { passed += count("passed"); failed += count("failed"); ignored += count("ignored") }
  END { print passed + 0, failed + 0, ignored + 0 }
' "$log")
rebuilt=$(grep -c '^[[:space:]]*Compiling ' "$log" || true)
echo "== hookledger-handlers without examples: $passed passed, $failed failed, $ignored ignored ($rebuilt crates compiled)"
# dev/feature-align's dependencies keep this at the handlers crate alone.
if [ "$rebuilt" -gt 3 ]; then
  echo "note: the handlers-alone run compiled $rebuilt crates, not just hookledger-handlers: a dependency's features differ from the workspace run's (see dev/feature-align/Cargo.toml)" >&2
fi
if [ "$status" != 0 ] || [ "$failed" != 0 ] || [ "$ignored" != 0 ] || [ "$passed" = 0 ]; then
  echo "the handlers crate without the examples feature: tests failed, were ignored or none ran (exit $status)" >&2
  exit 1
fi

echo "== the starter project: scripts/new-project.sh into a temporary folder, hookledger from this checkout; its make test, then sam validate --lint of its template.yaml"
starter=$(mktemp -d /tmp/hookledger-starter.XXXXXX)
trap 'rm -f "$log"; rm -rf "$starter"' EXIT
scripts/new-project.sh "$starter/our-webhooks"
set +e
# This workspace's target folder: the project's dependencies are this checkout's crates, and
# its dev profile is this workspace's (tests/tests/api/layout.rs), so they are built once.
(cd "$starter/our-webhooks" && CARGO_TARGET_DIR="$target_dir" make test) 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
read -r passed failed ignored < <(awk '
  function count(word,   i, n) {
    n = 0
    for (i = 1; i < NF; i++) if ($(i + 1) ~ ("^" word)) n += $i
    return n
  }
  /^test result:/ { passed += count("passed"); failed += count("failed"); ignored += count("ignored") }
  END { print passed + 0, failed + 0, ignored + 0 }
' "$log")
echo "== the starter project: $passed passed, $failed failed, $ignored ignored"
if [ "$status" != 0 ] || [ "$failed" != 0 ] || [ "$ignored" != 0 ] || [ "$passed" -lt 2 ]; then
  echo "the starter project's make test failed, ignored a test or ran fewer than its 2 tests (exit $status)" >&2
  exit 1
fi
(cd "$starter/our-webhooks" && sam validate --lint --template template.yaml)
