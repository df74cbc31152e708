#!/usr/bin/env python3
"""Interop with the providers' own libraries (installed from PyPI into .venv-tools by make test).

Driven by tests/tests/api/interop.rs:

  interop.py sign    < spec.json   deliveries signed by the official libraries, as JSON on stdout
  interop.py verify  < deliveries  each delivery verified by the official verifier, as JSON

spec.json: {"now": <unix>, "deliveries": [{"name", "library", "secret", "msg_id", "body"}]}
deliveries: [{"name", "library", "secret", "headers": {..}, "body"}]

Only the libraries' public signing/verifying entry points are used (for Stripe, its documented
test helper `WebhookSignature.generate_signature_header`; for Paddle, the SDK's own HMAC
`PaddleSignature.calculate_hmac`, as the SDK has no signing helper).
"""
import json
import sys
from datetime import datetime, timezone


def sign(spec):
    now = spec["now"]
    out = []
    for d in spec["deliveries"]:
        lib, secret, body = d["library"], d["secret"], d["body"]
        if lib == "stripe":
            import stripe

            header = stripe.WebhookSignature.generate_signature_header(body, secret, timestamp=now)
            headers = {"Stripe-Signature": header}
        elif lib in ("standardwebhooks", "svix"):
            when = datetime.fromtimestamp(now, tz=timezone.utc)
            if lib == "standardwebhooks":
                from standardwebhooks.webhooks import Webhook

                prefix = "webhook"
            else:
                from svix.webhooks import Webhook

                prefix = "svix"
            signature = Webhook(secret).sign(d["msg_id"], when, body)
            headers = {
                f"{prefix}-id": d["msg_id"],
                f"{prefix}-timestamp": str(now),
                f"{prefix}-signature": signature,
            }
        elif lib == "slack_sdk":
            from slack_sdk.signature import SignatureVerifier

            signature = SignatureVerifier(secret).generate_signature(timestamp=str(now), body=body)
            headers = {"X-Slack-Request-Timestamp": str(now), "X-Slack-Signature": signature}
        elif lib == "paddle":
            from paddle_billing.Notifications.PaddleSignature import PaddleSignature

            h1 = PaddleSignature.calculate_hmac(secret, f"{now}:{body}".encode("utf-8")).hexdigest()
            headers = {"Paddle-Signature": f"ts={now};h1={h1}"}
        else:
            raise SystemExit(f"unknown library {lib}")
        out.append({"name": d["name"], "headers": headers, "body": body})
    return out


class _PaddleRequest:
    def __init__(self, headers, body):
        self.headers = headers
        self.body = body


def verify(deliveries):
    out = []
    for d in deliveries:
        lib, secret, body, headers = d["library"], d["secret"], d["body"], d["headers"]
        error = None
        try:
            if lib == "stripe":
                import stripe

                stripe.Webhook.construct_event(body, headers.get("stripe-signature"), secret)
            elif lib == "standardwebhooks":
                from standardwebhooks.webhooks import Webhook

                Webhook(secret).verify(body, headers)
            elif lib == "svix":
                from svix.webhooks import Webhook

                Webhook(secret).verify(body, headers)
            elif lib == "slack_sdk":
                from slack_sdk.signature import SignatureVerifier

                ok = SignatureVerifier(secret).is_valid(
                    body=body,
                    timestamp=headers.get("x-slack-request-timestamp"),
                    signature=headers.get("x-slack-signature"),
                )
                if not ok:
                    error = "is_valid returned False"
            elif lib == "paddle":
                from paddle_billing.Notifications.Secret import Secret
                from paddle_billing.Notifications.Verifier import Verifier

                request = _PaddleRequest({"Paddle-Signature": headers.get("paddle-signature")}, body.encode("utf-8"))
                # The SDK's default drift window is 5 s, which a busy test machine (or a Lambda
                # cold start) can exceed; hookledger's default tolerance is 300 s, used here too.
                if not Verifier(maximum_variance=300).verify(request, Secret(secret)):
                    error = "verify returned False"
            else:
                raise SystemExit(f"unknown library {lib}")
        except SystemExit:
            raise
        except Exception as e:  # the libraries raise their own exception types
            error = f"{type(e).__name__}: {e}"
        out.append({"name": d["name"], "accepted": error is None, "error": error})
    return out


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    data = json.load(sys.stdin)
    if mode == "sign":
        result = sign(data)
    elif mode == "verify":
        result = verify(data)
    else:
        raise SystemExit("usage: interop.py sign|verify < input.json")
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
