#!/usr/bin/env python3
"""The secret scan of `make test`: no signing secret, API key, database password, signature
value or payload value in the complete log output of the test suite.

Usage: scripts/scan-test-logs.py [--min-bytes N] PATH...
  PATH: log files, or folders whose files are all read (recursively): the cargo test log and the
  folder of HOOKLEDGER_TEST_LOG_DIR (tests/src/test_log.rs: the in-process tests' JSON logs and
  the output of the processes they spawn).

What counts as a secret:
  - every string under a key naming a secret ("secret", "secrets", "api_key", "token",
    "password", "private_key", ...) in events/sources*.json;
  - secret-shaped string literals in the tests' sources (tests/, handler-testing/,
    console/tests/, functions/console/tests/):
    whsec_..., sk_/rk_/pk_ test and live keys, pdl_..., github_pat_..., gh?_..., constants named
    *SECRET*, *KEY*, *TOKEN* or *PASSWORD*, and PASSWORD '...' in SQL;
  - the password of DATABASE_URL and HOOKLEDGER_TEST_POOLER_URL, when they have one;
  - the lines of HOOKLEDGER_SCAN_EXTRA_SECRETS, if set;
  - signature values in the forms of their headers (a payload digest is 64 hex digits too, so
    only the prefixed forms count): t=..,v1=<hex>, v1=<hex>, sha256=<hex>, v0=<hex>, h1=<hex>,
    v1,<base64>, sha512=<base64>, and a base64 value after a Shopify HMAC header name.

What counts as a payload value: the marker the end-to-end tests plant in the payloads they send
(PAYLOAD_MARKER in tests/src/lib.rs, read from there): a log line holding it quotes a payload.

Exits 1 listing each finding (file, line, what; never the value itself: this output is a log
too), 2 when fewer than --min-bytes (default 100000) bytes were read or no path exists: a scan
that read nothing proves nothing. Exits 0 with a one-line summary otherwise.
"""

import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent

SECRET_KEYS = re.compile(r"secret|api_key|apikey|token|password|private_key|signing_key", re.I)

LITERALS = [
    re.compile(r'"(whsec_[A-Za-z0-9+/=_-]{8,})"'),
    re.compile(r'"((?:sk|rk|pk)_(?:test|live)_[A-Za-z0-9_]{6,})"'),
    re.compile(r'"(pdl_[A-Za-z0-9_]{8,})"'),
    re.compile(r'"(github_pat_[A-Za-z0-9_]{8,})"'),
    re.compile(r'"(gh[pousr]_[A-Za-z0-9]{8,})"'),
    re.compile(r'const [A-Z0-9_]*(?:SECRET|KEY|TOKEN|PASSWORD)[A-Z0-9_]*: &str = "([^"]{8,})"'),
    re.compile(r"PASSWORD\s+'([^']{6,})'", re.I),
]

SIGNATURES = [
    ("a Stripe signature (v1=<hex>)", re.compile(r"v1=[0-9a-f]{64}")),
    ("a GitHub signature (sha256=<hex>)", re.compile(r"sha256=[0-9a-fA-F]{64}")),
    ("a Slack signature (v0=<hex>)", re.compile(r"v0=[0-9a-f]{64}")),
    ("a Paddle signature (h1=<hex>)", re.compile(r"h1=[0-9a-f]{64}")),
    ("a Standard Webhooks signature (v1,<base64>)", re.compile(r"v1,[A-Za-z0-9+/]{43}=")),
    ("a SHA-512 signature (sha512=<base64>)", re.compile(r"sha512=[A-Za-z0-9+/]{86}==")),
    (
        "a Shopify signature",
        re.compile(r"hmac-sha256[\"'\\]*\s*[:=]\s*[\"'\\]*[A-Za-z0-9+/]{43}=", re.I),
    ),
]

# Values a *KEY* constant may hold that are names, not secrets (header names, env names).
NOT_SECRET = re.compile(r"^[a-z0-9.-]+$|^[A-Z0-9_]+$")


def strings_under_secret_keys(value, inside=False):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from strings_under_secret_keys(item, inside or bool(SECRET_KEYS.search(key)))
    elif isinstance(value, list):
        for item in value:
            yield from strings_under_secret_keys(item, inside)
    elif isinstance(value, str) and inside:
        yield value


def collect_secrets():
    secrets = {}
    for path in sorted((ROOT / "events").glob("sources*.json")):
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            sys.exit(f"scan-test-logs: cannot read {path}: {error}")
        for value in strings_under_secret_keys(document):
            if len(value) >= 8:
                secrets.setdefault(value, f"a secret of {path.relative_to(ROOT)}")
    for folder in [
        "tests", "handler-testing", "console/tests", "functions/console/tests",
    ]:
        for path in sorted((ROOT / folder).rglob("*.rs")):
            text = path.read_text(errors="replace")
            for pattern in LITERALS:
                for match in pattern.finditer(text):
                    value = match.group(1)
                    if NOT_SECRET.match(value) or "{" in value:
                        continue
                    secrets.setdefault(value, f"a test fixture of {path.relative_to(ROOT)}")
    for env in ["DATABASE_URL", "HOOKLEDGER_TEST_POOLER_URL"]:
        url = os.environ.get(env, "")
        password = urlsplit(url).password if "://" in url else None
        if password:
            secrets.setdefault(password, f"the database password of {env}")
    for line in os.environ.get("HOOKLEDGER_SCAN_EXTRA_SECRETS", "").splitlines():
        if line.strip():
            secrets.setdefault(line.strip(), "HOOKLEDGER_SCAN_EXTRA_SECRETS")
    return secrets


MARKER_CONST = re.compile(r'pub const PAYLOAD_MARKER: &str = "([^"]{8,})";')


def payload_marker():
    """The marker the tests plant in payloads (tests/src/lib.rs), or exit: without it the scan
    would silently stop looking for payload values."""
    path = ROOT / "tests" / "src" / "lib.rs"
    try:
        match = MARKER_CONST.search(path.read_text())
    except OSError as error:
        sys.exit(f"scan-test-logs: cannot read {path}: {error}")
    if not match:
        sys.exit(f"scan-test-logs: no PAYLOAD_MARKER in {path}: the payload marker moved")
    return match.group(1)


def files_of(paths):
    for path in paths:
        path = Path(path)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            yield path


def main(argv):
    min_bytes = 100_000
    if len(argv) >= 2 and argv[0] == "--min-bytes":
        min_bytes = int(argv[1])
        argv = argv[2:]
    if not argv:
        sys.exit(__doc__)
    secrets = collect_secrets()
    marker = payload_marker()
    if not secrets:
        print("scan-test-logs: no secrets collected: the sources or fixtures moved", file=sys.stderr)
        return 2
    findings = []
    files = 0
    total = 0
    for path in files_of(argv):
        files += 1
        data = path.read_bytes()
        total += len(data)
        text = data.decode("utf-8", errors="replace")

        def line_of(index):
            return text.count("\n", 0, index) + 1

        for secret, what in secrets.items():
            start = text.find(secret)
            while start != -1 and len(findings) < 1000:
                findings.append(f"{path}:{line_of(start)}: {what} ({secret[:4]}..., {len(secret)} chars)")
                start = text.find(secret, start + 1)
        start = text.find(marker)
        while start != -1 and len(findings) < 1000:
            findings.append(f"{path}:{line_of(start)}: a payload value (the tests' planted marker)")
            start = text.find(marker, start + 1)
        for what, pattern in SIGNATURES:
            for match in pattern.finditer(text):
                findings.append(f"{path}:{line_of(match.start())}: {what}")
                if len(findings) >= 1000:
                    break
    if total < min_bytes:
        print(
            f"scan-test-logs: read {total} bytes in {files} files, fewer than {min_bytes}: "
            "the logs were not collected (HOOKLEDGER_TEST_LOG_DIR?), nothing is proven",
            file=sys.stderr,
        )
        return 2
    if findings:
        print(
            f"scan-test-logs: {len(findings)} secret, signature or payload values in the test logs:",
            file=sys.stderr,
        )
        for finding in findings[:200]:
            print(f"  {finding}", file=sys.stderr)
        return 1
    print(
        f"scan-test-logs: {files} files, {total} bytes, {len(secrets)} secrets and "
        f"{len(SIGNATURES)} signature forms and the payload marker: none found"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
