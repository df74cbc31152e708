#!/usr/bin/env bash
# make fuzz: builds every cargo-fuzz target of dev/fuzz/ (nightly), runs each for FUZZ_SECS
# seconds (default 60) from its seed corpus, and reports per target the executions, exec/s,
# corpus size and crashes, on stdout and in dev/fuzz/RESULTS.md. Exits non-zero when any target
# crashed (the input is in dev/fuzz/artifacts/<target>/: copy it to
# dev/fuzz/regressions/<target>/, where the stable replay test of `make test` runs it, and fix
# the bug).
#
# The cargo-fuzz crate is dev/fuzz/, not cargo-fuzz's default ./fuzz: every cargo fuzz command
# takes --fuzz-dir dev/fuzz, from the repository root (so does reproducing a crash by hand:
# cargo +nightly fuzz run --fuzz-dir dev/fuzz <target> <artifact>; cargo-fuzz's own
# "Reproduce with" hint leaves the option out, since the folder's name is still fuzz).
#
# Installs cargo-fuzz (pinned, from crates.io, built with the stable toolchain: its own
# dependencies do not build on nightly) into .tools/cargo-fuzz when missing. Needs the nightly
# toolchain (rustup toolchain install nightly).
#
# Environment: FUZZ_SECS (per target), FUZZ_TARGETS (space-separated subset; default all),
# FUZZ_SANITIZER (cargo fuzz --sanitizer: none (default; the code under test is safe Rust, and
# none runs several times faster) or address), FUZZ_RESULTS (default dev/fuzz/RESULTS.md; empty:
# do not write it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fuzz_dir=dev/fuzz

FUZZ_SECS=${FUZZ_SECS:-60}
FUZZ_SANITIZER=${FUZZ_SANITIZER:-none}
FUZZ_RESULTS=${FUZZ_RESULTS-$fuzz_dir/RESULTS.md}
CARGO_FUZZ_VERSION=0.13.1
tools=$root/.tools/cargo-fuzz
all_targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$fuzz_dir/Cargo.toml" | grep -v '^hookledger-fuzz$')
targets=${FUZZ_TARGETS:-$all_targets}
count=$(wc -w <<<"$targets")

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "make fuzz: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
  exit 2
fi

started=$(date +%s)
install_secs=0
if ! "$tools/bin/cargo-fuzz" --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
  echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION into .tools/cargo-fuzz (once; about 2 minutes on 2 cores)"
  nice -n 5 cargo +stable install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" \
    --root "$tools" --quiet
  install_secs=$(( $(date +%s) - started ))
fi
export PATH=$tools/bin:$PATH
# The fuzz build has its own flags (sanitizer coverage): never share a stable target dir.
export CARGO_TARGET_DIR=$root/$fuzz_dir/target

echo "== cargo +nightly fuzz build ($count targets, sanitizer $FUZZ_SANITIZER, debug assertions on)"
build_started=$(date +%s)
if [ -z "${FUZZ_TARGETS:-}" ]; then
  nice -n 5 cargo +nightly fuzz build --fuzz-dir "$fuzz_dir" --sanitizer "$FUZZ_SANITIZER" \
    --debug-assertions
else
  for target in $targets; do
    nice -n 5 cargo +nightly fuzz build --fuzz-dir "$fuzz_dir" --sanitizer "$FUZZ_SANITIZER" \
      --debug-assertions "$target"
  done
fi
build_secs=$(( $(date +%s) - build_started ))

total=$(( count * FUZZ_SECS ))
echo "== fuzzing $count targets for ${FUZZ_SECS}s each: about $(( total / 60 ))m$(( total % 60 ))s in all"
mkdir -p "$fuzz_dir/logs"
rows=()
crashed=0
for target in $targets; do
  work=$fuzz_dir/work/$target
  artifacts=$fuzz_dir/artifacts/$target
  log=$fuzz_dir/logs/$target.log
  rm -rf "$artifacts"
  mkdir -p "$work" "$artifacts" "$fuzz_dir/corpus/$target"
  echo "-- $target (${FUZZ_SECS}s; log $log)"
  set +e
  # One process, one thread (libFuzzer's default; -jobs/-workers would fork more): the machine
  # has 2 cores. New inputs go to the working corpus, never into the committed seeds.
  nice -n 5 cargo +nightly fuzz run --fuzz-dir "$fuzz_dir" --sanitizer "$FUZZ_SANITIZER" \
    --debug-assertions "$target" "$work" "$fuzz_dir/corpus/$target" -- \
    -max_total_time="$FUZZ_SECS" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" >"$log" 2>&1
  status=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(grep -o 'corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -1 | sed 's/corp: //')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
  crashes=$(find "$artifacts" -type f | wc -l)
  if [ "$status" != 0 ] && [ "$crashes" = 0 ]; then
    # Killed, out of memory or a build problem without an artifact: still a failure.
    crashes="error (exit $status)"
  fi
  if [ "$crashes" != 0 ]; then
    crashed=1
    echo "   CRASH: $(find "$artifacts" -type f | tr '\n' ' ')"
    grep -m3 -E "panicked at|ERROR: libFuzzer|SUMMARY" "$log" | sed 's/^/   /' || true
  fi
  row="| $target | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${corpus:-?} | $crashes |"
  echo "   $row"
  rows+=("$row")
done

header="| target | executions | exec/s | coverage (edges) | corpus (units/bytes) | crashes |"
rule="|---|---:|---:|---:|---:|---:|"
echo
echo "$header"
echo "$rule"
printf '%s\n' "${rows[@]}"
elapsed=$(( $(date +%s) - started ))

if [ -n "$FUZZ_RESULTS" ]; then
  {
    echo "# Fuzzing results"
    echo
    echo "Produced by \`make fuzz FUZZ_SECS=$FUZZ_SECS\` (scripts/fuzz.sh) on $(date -u +%Y-%m-%dT%H:%MZ),"
    echo "$(nproc) cores, $(cargo +nightly --version), cargo-fuzz $CARGO_FUZZ_VERSION, sanitizer"
    echo "\`$FUZZ_SANITIZER\`, debug assertions (overflow checks) on, one libFuzzer process at a time,"
    echo "${FUZZ_SECS} s per target from the committed seeds of \`dev/fuzz/corpus/<target>/\`."
    echo
    echo "$header"
    echo "$rule"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Executions: libFuzzer's \`stat::number_of_executed_units\` (\`-print_final_stats=1\`);"
    echo "exec/s: its \`stat::average_exec_per_sec\`; coverage and corpus: its last status line;"
    echo "crashes: files written to \`dev/fuzz/artifacts/<target>/\` by this run."
    echo
    echo "Time: cargo-fuzz install ${install_secs} s (0 = already installed), build ${build_secs} s,"
    echo "whole run ${elapsed} s."
    echo
    echo "Every input that ever crashed a target is kept in \`dev/fuzz/regressions/<target>/\` and"
    echo "replayed, with the seeds, by the stable test \`dev/fuzz-entry/tests/replay.rs\` in \`make test\`."
  } >"$FUZZ_RESULTS"
  echo "== wrote $FUZZ_RESULTS"
fi
echo "== make fuzz: ${elapsed}s (install ${install_secs}s, build ${build_secs}s)"
exit "$crashed"
