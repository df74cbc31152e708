#!/usr/bin/env bash
# make package [ARCH=arm64|x86_64]: every function (one per function crate, functions/*/) built
# from the reference deployment's binaries (handlers/src/bin/<function>.rs, which hand
# `handlers::APP` to the function crate's `main`, as a team's project does) for AWS Lambda's
# provided.al2023 runtime in ONE `cargo lambda build --release` (shared dependencies compile
# once), zipped as <target dir>/lambda/<binary>/bootstrap.zip, then checked:
#   - each bootstrap's ELF machine is ARCH's, it links only glibc and libgcc_s (what every
#     al2023 image has; OpenSSL is vendored and static), and it needs no GLIBC_x.y newer than
#     al2023's 2.34 (scripts/check-bootstrap.py, which reads the ELF file itself);
#   - on a host of the same architecture (or with qemu-user and the arm64 loader for arm64),
#     each bootstrap is started without AWS_LAMBDA_RUNTIME_API and must stop with its own
#     error message, not the dynamic loader's;
#   - the handlers crate's `examples` feature is off.
# Then a table of the sizes and the build time.
#
# Target: <arch>-unknown-linux-gnu.2.34. cargo-lambda links with zig (`python3 -m ziglang`
# from .venv-tools), which takes the glibc version after the triple and links against stubs of
# exactly that glibc: pinning 2.34, al2023's own, means no symbol newer than the runtime's libc
# can sneak in, whatever glibc the build machine has (cargo-lambda's default, zig's 2.28, would
# do too; the pin makes the requirement explicit and tested).
#
# `scripts/package.sh --dry-run` prints the crates and the command without building.
set -euo pipefail
# Read whole before running: editing the file during a half-hour build cannot derail this run.
{
cd "$(dirname "$0")/.."
root=$(pwd)

GLIBC=2.34
dry_run=false
case "${1:-}" in
  --dry-run) dry_run=true ;;
  "") ;;
  *) echo "usage: ARCH=arm64|x86_64 scripts/package.sh [--dry-run]" >&2; exit 2 ;;
esac

case "${ARCH:-arm64}" in
  arm64 | aarch64) arch=arm64 triple=aarch64-unknown-linux-gnu ;;
  x86_64 | amd64 | x86-64) arch=x86_64 triple=x86_64-unknown-linux-gnu ;;
  *) echo "make package: ARCH must be arm64 (the default) or x86_64, not '${ARCH}'" >&2; exit 2 ;;
esac
target="$triple.$GLIBC"

# The functions: one per functions/<dir>/Cargo.toml, each the reference deployment's binary of
# that name (cargo metadata, so the target directory honours CARGO_TARGET_DIR and .cargo/config).
meta=$(cargo metadata --no-deps --format-version 1 --locked)
crates=$(python3 - "$meta" functions/*/Cargo.toml <<'EOF'
import json, os, sys
meta = json.loads(sys.argv[1])
by_manifest = {os.path.realpath(p["manifest_path"]): p for p in meta["packages"]}
deployment = next((p for p in meta["packages"] if p["name"] == "hookledger-handlers"), None)
if deployment is None:
    sys.exit("the reference deployment, hookledger-handlers (handlers/), is not a workspace member")
bins = {t["name"] for t in deployment["targets"] if "bin" in t["kind"]}
for manifest in sys.argv[2:]:
    if by_manifest.get(os.path.realpath(manifest)) is None:
        sys.exit(f"{manifest} is not a workspace member: add its folder to [workspace] members in Cargo.toml")
    function = os.path.basename(os.path.dirname(manifest))
    if function not in bins:
        sys.exit(f"{manifest}: the reference deployment has no binary {function} (handlers/src/bin/{function}.rs)")
    print("hookledger-handlers", function)
print("@target", meta["target_directory"])
EOF
)
target_dir=$(sed -n 's/^@target //p' <<<"$crates")
crates=$(grep -v '^@target ' <<<"$crates" || true)
if [ -z "$crates" ]; then
  echo "make package: no function crates (functions/*/Cargo.toml)" >&2
  exit 1
fi
binaries=()
while read -r _ binary; do
  binaries+=("$binary")
done <<<"$crates"
pflags=(-p hookledger-handlers)
for b in "${binaries[@]}"; do pflags+=(--bin "$b"); done
build=(cargo lambda build --release --locked --target "$target" --output-format zip "${pflags[@]}")

# The deployed handlers are the user's own: the example handlers (and their tables) must not
# ride along. Features are resolved for exactly the packages built together, over the edges a
# binary build follows (normal and build dependencies: resolver 2 does not unify the features of
# dev-dependencies, such as the test harness a function crate's own tests use, into it).
features=$(cargo tree --locked --target "$triple" -e normal,build,features -i hookledger-handlers \
  -p hookledger-handlers)
if grep -q 'feature "examples"' <<<"$features"; then
  echo "make package: the reference deployment's build turns on hookledger-handlers' examples feature; the Lambda build must not" >&2
  exit 1
fi

echo "== make package: ${binaries[*]} (hookledger-handlers) for $arch (provided.al2023, glibc $GLIBC)"
if $dry_run; then
  echo "${build[*]}"
  for b in "${binaries[@]}"; do echo "$target_dir/lambda/$b/bootstrap.zip"; done
  exit 0
fi

# The tools: cargo-lambda and zig from .venv-tools (make tools), the Rust standard library for
# the target (rustup; x86_64 is the host's on a usual machine).
if ! command -v cargo-lambda >/dev/null || ! python3 -m ziglang version >/dev/null 2>&1; then
  echo "make package: cargo-lambda and zig come from .venv-tools: run 'make tools' (or put .venv-tools/bin first on PATH)" >&2
  exit 1
fi
if [ ! -d "$(rustc --print sysroot)/lib/rustlib/$triple/lib" ]; then
  if ! command -v rustup >/dev/null; then
    echo "make package: the Rust standard library for $triple is missing, and there is no rustup to add it" >&2
    exit 1
  fi
  echo "== rustup target add $triple"
  rustup target add "$triple"
fi

# No stale zip of another ARCH or an older build can pass for this one.
for b in "${binaries[@]}"; do rm -f "$target_dir/lambda/$b/bootstrap.zip"; done
echo "== ${build[*]}"
start=$(date +%s)
"${build[@]}"
build_secs=$(($(date +%s) - start))

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

host=$(uname -m)
runner=()
under=""
run_note=""
case "$arch:$host" in
  x86_64:x86_64 | arm64:aarch64 | arm64:arm64) ;;
  arm64:*)
    qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
    if [ -n "$qemu" ] && [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]; then
      runner=("$qemu" -L /usr/aarch64-linux-gnu)
      under=" (under $qemu)"
    else
      run_note="not started: no qemu-aarch64 with an arm64 glibc here (apt-get install qemu-user libc6-arm64-cross to start them too); the static checks above stand"
    fi
    ;;
  *) run_note="not started: a $host machine cannot run $arch binaries; the static checks above stand" ;;
esac

echo "== checks: ELF machine, linked libraries, glibc symbol versions (scripts/check-bootstrap.py)"
zips=()
for b in "${binaries[@]}"; do
  zip="$target_dir/lambda/$b/bootstrap.zip"
  if [ ! -f "$zip" ]; then
    echo "make package: cargo lambda did not write $zip" >&2
    exit 1
  fi
  zips+=("$zip")
done
python3 scripts/check-bootstrap.py --arch "$arch" --max-glibc "$GLIBC" "${zips[@]}"
echo "     so each is an $arch executable linked only against what every al2023 image has (glibc's"
echo "     libraries, libgcc_s) with no GLIBC_x.y newer than al2023's $GLIBC, TLS compiled in: it runs on provided.al2023"

echo "== start each bootstrap outside Lambda (no AWS_LAMBDA_RUNTIME_API): it must stop with its own message, not the loader's${under}"
failed=false
for b in "${binaries[@]}"; do
  mkdir -p "$work/$b"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("bootstrap", sys.argv[2])' \
    "$target_dir/lambda/$b/bootstrap.zip" "$work/$b"
  chmod +x "$work/$b/bootstrap"
  if [ -n "$run_note" ]; then
    continue
  fi
  set +e
  # A database URL (never reached: port 9 on loopback, and the pool connects lazily) and the
  # local sources get main() past its set-up, to the Lambda runtime's own complaint.
  out=$(cd "$work/$b" && env -i PATH=/usr/bin:/bin DATABASE_URL=postgres://hookledger@127.0.0.1:9/hookledger \
    HOOKLEDGER_SOURCES_FILE="$root/events/sources.local.json" timeout 20 "${runner[@]}" ./bootstrap 2>&1)
  status=$?
  set -e
  first=$( (grep -m1 AWS_LAMBDA_ <<<"$out" || grep -m1 . <<<"$out") | cut -c1-160)
  if grep -qiE 'error while loading shared libraries|not found \(required by|cannot execute|exec format error|No such file or directory$' <<<"$out" ||
    [ "$status" = 0 ] || [ "$status" -ge 124 ] || [ -z "$out" ]; then
    echo "FAIL $b: exit $status: ${first:-no output}"
    failed=true
  else
    echo "ok   $b: started, exit $status: $first"
  fi
done
[ -n "$run_note" ] && echo "     $run_note"
$failed && exit 1

echo "== packages ($arch, provided.al2023)"
printf '%-10s %-7s %12s %9s %12s %9s  %s\n' function arch bootstrap MB zip MB path
for b in "${binaries[@]}"; do
  zip="$target_dir/lambda/$b/bootstrap.zip"
  bsize=$(stat -c %s "$work/$b/bootstrap")
  zsize=$(stat -c %s "$zip")
  printf '%-10s %-7s %12d %9.2f %12d %9.2f  %s\n' "$b" "$arch" "$bsize" \
    "$(awk -v n="$bsize" 'BEGIN { print n / 1048576 }')" "$zsize" \
    "$(awk -v n="$zsize" 'BEGIN { print n / 1048576 }')" "$zip"
done
echo "build time: ${build_secs} s (cargo lambda build, $(nproc) cores)"
exit 0
}
