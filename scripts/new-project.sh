#!/usr/bin/env bash
# Writes a new project from the starter (starter/) into DIR: a team's own repository that
# depends on hookledger by version and holds only what is the team's.
#
#   scripts/new-project.sh DIR                          hookledger from this checkout (a path)
#   scripts/new-project.sh DIR --git URL --tag TAG      hookledger from its repository, by tag
#
# DIR must not exist or be empty. The package is named after DIR. The project gets: one
# handler and its migration, sources.json, template.yaml (hookledger's, with every function
# built from the project), a Makefile (test, demo, run, check, package, validate), the
# PostgreSQL scripts its tests use, and Cargo.lock with the versions this hookledger was tested
# with.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
usage() { echo "usage: $0 DIR [--git URL --tag TAG]" >&2; exit 2; }
[ $# -ge 1 ] || usage
dir=$1
shift
dependency="path = \"$here/hookledger\""
git="" tag=""
while [ $# -gt 0 ]; do
  case $1 in
    --git) [ $# -ge 2 ] || usage; git=$2; shift 2 ;;
    --tag) [ $# -ge 2 ] || usage; tag=$2; shift 2 ;;
    *) usage ;;
  esac
done
if [ -n "$git" ]; then
  [ -n "$tag" ] || { echo "$0: --git needs --tag (a version to depend on)" >&2; exit 2; }
  dependency="git = \"$git\", tag = \"$tag\""
elif [ -n "$tag" ]; then
  usage
fi
if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "$0: $dir exists and is not empty" >&2
  exit 1
fi
name=$(basename "$dir" | tr 'A-Z_' 'a-z-' | tr -cd 'a-z0-9-')
[ -n "$name" ] || { echo "$0: cannot name a package after $dir" >&2; exit 1; }

mkdir -p "$dir/scripts"
cp -R "$here/starter/." "$dir/"
sed -i -e "s|^name = \"our-webhooks\"$|name = \"$name\"|" \
  -e "s|^hookledger = { path = \"../hookledger\"|hookledger = { $dependency|" "$dir/Cargo.toml"
if grep -q '"\.\./hookledger"' "$dir/Cargo.toml"; then
  echo "$0: could not write the hookledger dependency into $dir/Cargo.toml" >&2
  exit 1
fi
cp "$here/scripts/postgres.sh" "$here/scripts/with-postgres.sh" "$dir/scripts/"
# hookledger's template, each function built from this project (its binaries in src/bin/).
sed -E 's|^( +CodeUri: )handlers$|\1.|' "$here/template.yaml" >"$dir/template.yaml"
# The dependency versions this hookledger was tested with; cargo adds the project's own.
cp "$here/Cargo.lock" "$dir/Cargo.lock"
echo "new project: $dir (package $name, hookledger: $dependency)"
echo "next: cd $dir && make test"
