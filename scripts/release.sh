#!/usr/bin/env bash
# Prepares a release: scripts/release.sh X.Y.Z
#   - sets the workspace's version and every product crate's path-dependency version to X.Y.Z
#     (Cargo.toml), and Cargo.lock with them;
#   - turns CHANGELOG.md's "## Unreleased" into "## [X.Y.Z] - <today, UTC>" under a new, empty
#     "## Unreleased";
#   - commits both and tags vX.Y.Z (annotated). Pushing the tag is yours: git push origin vX.Y.Z.
# Refuses a dirty tree, a version that is not X.Y.Z, an existing tag, and an empty Unreleased.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-}
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "usage: $0 X.Y.Z" >&2; exit 2; }
[ -z "$(git status --porcelain)" ] || { echo "$0: the working tree is not clean" >&2; exit 1; }
! git rev-parse -q --verify "refs/tags/v$version" >/dev/null || { echo "$0: tag v$version exists" >&2; exit 1; }
python3 - "$version" <<'PY'
import datetime, re, sys
version = sys.argv[1]
toml = open("Cargo.toml").read()
toml, n = re.subn(r'(?m)^(version = ")[^"]+(")', rf'\g<1>{version}\2', toml, count=1)
assert n == 1, "no workspace version"
toml = re.sub(r'(\{ path = "[^"]+", version = ")[^"]+(")', rf'\g<1>{version}\2', toml)
open("Cargo.toml", "w").write(toml)
log = open("CHANGELOG.md").read()
head, sep, rest = log.partition("## Unreleased\n")
if not sep:
    sys.exit("CHANGELOG.md has no '## Unreleased'")
body = rest.split("\n## ", 1)[0]
if not body.strip():
    sys.exit("CHANGELOG.md: nothing under '## Unreleased' to release")
today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
open("CHANGELOG.md", "w").write(f"{head}## Unreleased\n\n## [{version}] - {today}\n{rest}")
PY
cargo update --workspace --offline --quiet
git add Cargo.toml Cargo.lock CHANGELOG.md
git commit -q -m "Release $version"
git tag -a "v$version" -m "hookledger $version"
echo "tagged v$version: push it with git push origin v$version"
