# A service receiving hookledger's `forward` deliveries, verified with the official Standard
# Webhooks library (pip install standardwebhooks). Quoted in the book; run by the tests.
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["FORWARD_SECRET"])  # the target's "secret", whsec_...
seen = set()  # in production: a unique index on the key, in the same transaction as the effect


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))  # the raw bytes
        try:
            webhook.verify(body, dict(self.headers), json_parse=False)  # a body may be a form
        except WebhookVerificationError as e:
            print("rejected", self.headers["webhook-id"], e, flush=True)
            self.send_response(401)
            return self.end_headers()
        key = self.headers["webhook-id"]  # {source}:{event_id}:{n}, the same on every retry
        if key not in seen:
            seen.add(key)
            print("received", key, self.headers["hookledger-event-type"], flush=True)
        self.send_response(204)  # any 2xx: delivered; 5xx or 429: hookledger retries
        self.end_headers()


HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8000"))), Receiver).serve_forever()
