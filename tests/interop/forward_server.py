#!/usr/bin/env python3
"""A local endpoint for hookledger's `forward` target that verifies EVERY request with the
official Standard Webhooks library (`standardwebhooks` from PyPI, tests/interop/requirements.txt).

  HOOKLEDGER_FORWARD_SECRET=whsec_... forward_server.py [--port 0] [--record FILE] [--quiet]
                                                        [--show-json]

Prints `{"port": N}` on its first stdout line once it listens on 127.0.0.1:N, then one line per
request: `verified webhook-id=<id> ...` or `NOT VERIFIED webhook-id=<id>: <why>`; with
--show-json, a verified JSON body of at most 256 bytes is printed at the end of its line (the
demo shows a transformed forward that way). With --record,
appends one JSON object per request to FILE (flushed at once):
{"path", "webhook_id", "verified", "error", "headers": {lowercased}, "body_b64"}.

Answers a verified request by its path (so the tests can ask for each kind of answer):
  /status/<code>[?retry_after=<v>][&body=<text>][&location=<url>]   that status
  /hang                                                              no answer for 60 s
  anything else                                                      204
An unverified request gets 401, as a real receiving service would answer.

Used by tests/tests/api/targets.rs and by `make demo` (scripts/demo.sh).
"""
import argparse
import base64
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from standardwebhooks.webhooks import Webhook

LOCK = threading.Lock()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record")
    parser.add_argument("--quiet", action="store_true", help="no line per request")
    parser.add_argument("--show-json", action="store_true",
                        help="end a verified request's line with its JSON body (256 bytes at most)")
    args = parser.parse_args()
    webhook = Webhook(os.environ["HOOKLEDGER_FORWARD_SECRET"])
    record = open(args.record, "a", encoding="utf-8") if args.record else None

    def shown(body, headers):
        if not args.show_json or len(body) > 256:
            return ""
        if not headers.get("content-type", "").startswith("application/json"):
            return ""
        return ": " + body.decode("utf-8", "replace")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            webhook_id = headers.get("webhook-id")
            try:
                # The raw bytes as received; json_parse=False: a forwarded body may be a form.
                webhook.verify(body, headers, json_parse=False)
                verified, error = True, None
            except Exception as e:  # the library's WebhookVerificationError, or a bad header
                verified, error = False, f"{type(e).__name__}: {e}"
            with LOCK:
                if record:
                    record.write(json.dumps({
                        "path": self.path,
                        "webhook_id": webhook_id,
                        "verified": verified,
                        "error": error,
                        "headers": headers,
                        "body_b64": base64.b64encode(body).decode("ascii"),
                    }) + "\n")
                    record.flush()
                if not args.quiet:
                    if verified:
                        print(f"verified webhook-id={webhook_id} "
                              f"event-type={headers.get('hookledger-event-type', '-')} "
                              f"attempt={headers.get('hookledger-attempt')} {len(body)} bytes"
                              f"{shown(body, headers)}",
                              flush=True)
                    else:
                        print(f"NOT VERIFIED webhook-id={webhook_id}: {error}", flush=True)
            if not verified:
                return self.answer(401, b"signature not verified")
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/hang":
                time.sleep(60)
                return
            if url.path.startswith("/status/"):
                extra = {}
                if "retry_after" in query:
                    extra["Retry-After"] = query["retry_after"]
                if "location" in query:
                    extra["Location"] = query["location"]
                return self.answer(int(url.path[len("/status/"):]),
                                   query.get("body", "").encode("utf-8"), extra)
            return self.answer(204, b"")

        def answer(self, status, body, extra=None):
            self.send_response(status)
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
