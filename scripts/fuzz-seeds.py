#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (dev/fuzz/corpus/<target>/, committed) from the
repository's own test vectors: the signed Lambda events of events/receiver/ (signed at
1732870000 with the secrets of events/sources.local.json, the clock and sources the targets use),
the sources configuration, and a few hostile variants. Deterministic; `make fuzz` does not need
it (the seeds are committed): run it after changing events/ (python3 scripts/fuzz-seeds.py)."""
import base64
import json
import os
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "dev" / "fuzz" / "corpus"
EVENTS = ROOT / "events" / "receiver"

# Source (the path's last segment) -> the verify target of its scheme.
VERIFY = {
    "stripe": "verify_stripe",
    "stripe-deferred": None,  # signed with another secret than the `stripe` source's
    "github": "verify_github",
    "acme": "verify_standard_webhooks",
    "acme-forward": None,
    "shopify": "verify_shopify",
    "slack": "verify_slack",
    "paddle": "verify_paddle",
    "partner": "verify_generic_hmac",
}

TARGETS = [
    "verify_stripe", "verify_github", "verify_standard_webhooks", "verify_shopify",
    "verify_slack", "verify_paddle", "verify_generic_hmac", "extract", "sources_config",
    "settings_env", "lambda_event", "sql_params", "filter", "transform",
]


def delivery(headers, body: bytes) -> bytes:
    """dev/fuzz-entry/src/delivery.rs's text form."""
    head = "".join(f"{name}: {value}\n" for name, value in headers)
    return head.encode() + b"\n" + body


def write(target, name, data: bytes):
    path = CORPUS / target / name
    path.write_bytes(data)


def main():
    for target in TARGETS:
        shutil.rmtree(CORPUS / target, ignore_errors=True)
        (CORPUS / target).mkdir(parents=True)

    for path in sorted(EVENTS.glob("*.json")):
        raw = path.read_bytes()
        write("lambda_event", path.name, raw)
        event = json.loads(raw)
        route = event.get("rawPath") or event.get("path") or ""
        source = route.rstrip("/").rsplit("/", 1)[-1]
        body = (event.get("body") or "").encode()
        if event.get("isBase64Encoded"):
            try:
                body = base64.b64decode(body, validate=True)
            except Exception:
                continue
        headers = sorted((event.get("headers") or {}).items())
        seed = delivery(headers, body)
        write("extract", path.stem, seed)
        target = VERIFY.get(source)
        if target:
            write(target, path.stem, seed)

    # Hostile variants of one signed delivery per scheme: timestamps at the i64 edges, a
    # repeated signature header, a header with a CR, an empty body.
    for target in TARGETS[:7]:
        seeds = sorted((CORPUS / target).iterdir())
        if not seeds:
            continue
        base = seeds[0].read_bytes()
        head, _, body = base.partition(b"\n\n")
        for edge in (b"9223372036854775807", b"-9223372036854775808", b"99999999999999999999"):
            write(target, f"edge-{edge[:4].decode()}", base.replace(b"1732870000", edge))
        first = head.split(b"\n")[0]
        write(target, "repeated-header", first + b"\n" + head + b"\n\n" + body)
        write(target, "header-cr", head.replace(b"\n", b"\r\n", 1) + b"\n\n" + body)
        write(target, "empty-body", head + b"\n\n")

    sources = (ROOT / "events" / "sources.local.json").read_bytes()
    write("sources_config", "sources.local.json", sources)
    for i, spec in enumerate(json.loads(sources)):
        write("sources_config", f"one-{i}-{spec['name']}.json", json.dumps([spec]).encode())
    write("sources_config", "empty-list.json", b"[]")
    write("sources_config", "duplicate-names.json",
          json.dumps([json.loads(sources)[0]] * 2).encode())

    write("settings_env", "minimal",
          b"DATABASE_URL=postgres://hookledger@127.0.0.1:5432/hookledger\n"
          b"HOOKLEDGER_SOURCES=" + json.dumps(json.loads(sources)[:1]).encode() + b"\n")
    write("settings_env", "tuned",
          b"DATABASE_URL=postgres://hookledger:pw@127.0.0.1:5432/hookledger?sslmode=require\n"
          b"HOOKLEDGER_SOURCES=" + json.dumps(json.loads(sources)).encode() + b"\n"
          b"HOOKLEDGER_STATEMENT_TIMEOUT_MS=5000\nHOOKLEDGER_LOCK_TIMEOUT_MS=2000\n"
          b"HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS=10000\nHOOKLEDGER_LEASE_SECS=60\n"
          b"HOOKLEDGER_WORKER_BATCH=10\nHOOKLEDGER_HANDLER_TIMEOUT_MS=3000\n"
          b"HOOKLEDGER_BACKOFF_BASE_SECS=1\nHOOKLEDGER_BACKOFF_CAP_SECS=60\n"
          b"HOOKLEDGER_DB_POOL_SIZE=4\nHOOKLEDGER_DB_STATEMENT_CACHE=on\nHOOKLEDGER_DB_TRANSACTION_LIMITS=on\n"
          b"HOOKLEDGER_OUTBOX_CONCURRENCY=4\nHOOKLEDGER_WORKER_MARGIN_MS=500\nHOOKLEDGER_SWEEP_BATCH_SIZE=5000\n"
          b"HOOKLEDGER_SWEEP_DUTY_PERCENT=10\nHOOKLEDGER_SWEEP_MARGIN_MS=1000\nHOOKLEDGER_SWEEP_MAX_BATCHES=100\n"
          b"HOOKLEDGER_SWEEP_PAUSE_MS=10\nHOOKLEDGER_AUDIT_STUCK_AFTER_SECS=600\n"
          b"HOOKLEDGER_AUDIT_IDLE_IN_TRANSACTION_SECS=60\n"
          b"HOOKLEDGER_SOURCES_REFRESH_SECS=60\nHOOKLEDGER_WORKER_FUNCTION=worker\n")
    write("settings_env", "huge-numbers",
          b"DATABASE_URL=postgres://h@127.0.0.1/h\nHOOKLEDGER_SOURCES=[]\n"
          b"HOOKLEDGER_STATEMENT_TIMEOUT_MS=18446744073709551615\n"
          b"HOOKLEDGER_LEASE_SECS=18446744073709551615\nHOOKLEDGER_WORKER_BATCH=-1\n")

    # SQL handler parameters: specs, a blank line, the event's body (sql_params.rs).
    def params(name, specs, body: bytes):
        write("sql_params", name, json.dumps(specs).encode() + b"\n\n" + body)

    refund = json.dumps({"id": "evt_1", "type": "charge.refunded", "created": 1732870000,
                         "data": {"object": {"id": "ch_1", "amount_refunded": 500,
                                             "ratio": "0.25", "paid": True, "meta": {"k": [1]},
                                             "at": "2024-11-29T08:46:40Z", "gone": None}}}).encode()
    params("every-type", [
        {"path": "/data/object/id", "type": "text"},
        {"path": "/data/object/amount_refunded", "type": "bigint"},
        {"path": "/data/object/ratio", "type": "numeric"},
        {"path": "/data/object/paid", "type": "boolean"},
        {"path": "/data/object/at", "type": "timestamptz"},
        {"path": "/created", "type": "timestamptz"},
        {"path": "", "type": "jsonb"},
        {"path": "/data/object/gone", "type": "text", "optional": True},
        {"event": "id"}, {"event": "type"}, {"event": "source"},
    ], refund)
    params("mismatches", [
        {"path": "/data/object/meta", "type": "text"},
        {"path": "/data/object/id", "type": "bigint"},
        {"path": "/data/object/id", "type": "numeric"},
        {"path": "/data/object/amount_refunded", "type": "boolean"},
        {"path": "/data/object/ratio", "type": "timestamptz"},
        {"path": "/data/object/gone", "type": "bigint"},
        {"path": "/data/object/missing~1x", "type": "text"},
    ], refund)
    params("form", [
        {"form": "user_id", "type": "text"},
        {"form": "count", "type": "bigint"},
        {"form": "missing", "type": "text", "optional": True},
    ], b"user_id=U123&count=42&text=a%20secret%20value%20here")
    params("not-json", [{"path": "/a", "type": "text"}], b"{\"a\": ")
    params("bad-specs", [{"path": "a", "type": "text"}, {"form": "x"}], b"{}")

    # Target filters and transforms: the expression, a newline, the event's body
    # (dev/fuzz-entry/src/expression.rs).
    def expression(target, name, text, body: bytes):
        write(target, name, text.encode() + b"\n" + body)

    stripe = json.dumps({"id": "evt_1", "object": "event", "type": "charge.refunded",
                         "livemode": True,
                         "data": {"object": {"id": "ch_1", "amount_refunded": 5000,
                                             "currency": "usd", "metadata": {"order_id": "ord_1"},
                                             "refunds": {"data": [{"id": "re_1", "amount": 5000}]}}}},
                        separators=(",", ":")).encode()
    expression("filter", "stripe-refund-amount",
               "type == 'charge.refunded' && body.data.object.amount_refunded > `1000`", stripe)
    expression("filter", "stripe-livemode-prefix",
               "body.livemode && starts_with(type, 'charge.')", stripe)
    expression("filter", "stripe-refunds-filter-projection",
               "length(body.data.object.refunds.data[?amount > `100`]) > `0`", stripe)
    expression("filter", "runtime-error-length-of-number",
               "length(body.data.object.amount_refunded)", stripe)
    expression("filter", "twilio-form-fields", "body.CallStatus == 'completed'",
               b"CallSid=CA1&CallStatus=completed")
    expression("filter", "invalid-expression", "body.[?", b"{}")
    expression("filter", "deep-negation-chain", "!" * 150 + "a", b'{"a":1}')
    expression("transform", "stripe-multiselect-hash",
               "{id: id, charge: body.data.object.id, amount: body.data.object.amount_refunded, "
               "order: body.data.object.metadata.order_id}", stripe)
    expression("transform", "stripe-projection-sort",
               "body.data.object.refunds.data[*].{id: id, amount: amount} | sort_by(@, &amount)",
               stripe)
    expression("transform", "functions-list",
               "[source, id, type, to_string(body.data.object.amount_refunded), "
               "join(',', keys(body))]", stripe)
    expression("transform", "null-value", "body.nope", stripe)
    expression("transform", "merge", "merge(body.data.object.metadata, {source: source})", stripe)
    expression("transform", "deep-object-projection-chain", "a" + ".*" * 199, b'{"a":{"a":1}}')
    expression("transform", "nested-functions-at-the-depth-limit",
               "abs(" * 63 + "`1`" + ")" * 63, b"{}")


if __name__ == "__main__":
    main()
