#!/usr/bin/env bash
# Reads the output of `cargo test --workspace` and decides whether the run counts as a pass:
#
#   scripts/check-test-log.sh LOG [MINIMUM_FILE]
#
# Fails (exit 1, the reason on stderr) when any test failed, when any test was ignored (an
# ignored test is a test that did not run), when no test passed at all, or when the end-to-end
# binary (tests/tests/api, reported by cargo as `Running tests/api/main.rs`) passed fewer tests
# than MINIMUM_FILE says (default tests/minimum-e2e-tests: a number, `#` comments allowed; raise
# it as tests are added). Prints one summary line either way. Tested by tests/tests/api/scripts.rs.
set -euo pipefail
log=$1
minimum_file=${2:-$(dirname "$0")/../tests/minimum-e2e-tests}

minimum=$(grep -v '^[[:space:]]*#' "$minimum_file" | tr -d '[:space:]')
case "$minimum" in
  '' | *[!0-9]*) echo "$minimum_file: expected a number of tests, found '$minimum'" >&2; exit 1 ;;
esac

# Sums over every `test result:` line; e2e counts the one that follows `Running tests/api/main.rs`.
read -r passed failed ignored e2e e2e_seen < <(awk '
  function count(word,   i, n) {
    n = 0
    for (i = 1; i < NF; i++) if ($(i + 1) ~ ("^" word)) n += $i
    return n
  }
  /^[[:space:]]*(Running|Doc-tests)[[:space:]]/ { in_e2e = ($0 ~ /Running tests\/api\/main\.rs /) }
  /^test result:/ {
    p = count("passed"); passed += p; failed += count("failed"); ignored += count("ignored")
    if (in_e2e) { e2e += p; e2e_seen = 1; in_e2e = 0 }
  }
  END { print passed + 0, failed + 0, ignored + 0, e2e + 0, e2e_seen + 0 }
' "$log")

echo "== $passed passed, $failed failed, $ignored ignored; end-to-end: $e2e passed (minimum $minimum)"
status=0
if [ "$failed" != 0 ]; then
  echo "tests failed" >&2
  status=1
fi
if [ "$ignored" != 0 ]; then
  echo "$ignored test(s) ignored: every test must run (remove the #[ignore] or the test)" >&2
  status=1
fi
if [ "$passed" = 0 ]; then
  echo "no test ran: refusing to pass" >&2
  status=1
fi
if [ "$e2e_seen" = 0 ]; then
  echo "the end-to-end binary (tests/tests/api) did not report a result" >&2
  status=1
elif [ "$e2e" -lt "$minimum" ]; then
  echo "the end-to-end binary passed $e2e tests, fewer than the $minimum in $minimum_file" >&2
  status=1
fi
exit "$status"
