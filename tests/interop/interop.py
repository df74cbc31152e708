#!/usr/bin/env python3
"""Interop with the providers' own libraries (installed from PyPI into .venv-tools by make test).

Driven by tests/tests/api/interop.rs:

  interop.py sign    < spec.json   deliveries signed by the official libraries, as JSON on stdout
  interop.py verify  < deliveries  each delivery verified by the official verifier, as JSON

spec.json: {"now": <unix>, "deliveries": [{"name", "library", "secret", "msg_id", "body"}]}
deliveries: [{"name", "library", "secret", "headers": {..}, "body"}]
sign answers [{"name", "headers", "body"}] (plus "url" for the libraries that sign a URL).

Only the libraries' public signing/verifying entry points are used (for Stripe, its documented
test helper `WebhookSignature.generate_signature_header`; for Paddle, the SDK's own HMAC
`PaddleSignature.calculate_hmac`, as the SDK has no signing helper). Where a library only
verifies, `sign` computes the signature with plain hmac/cryptography/PyNaCl code exactly as the
provider documents it, and `verify` always calls the library.

Fields some libraries need besides name/library/secret/body (in the spec and in deliveries):

  "url"          the full URL the provider posts to (twilio, twilio_json, square, hubspot).
                 twilio_json: sign appends ?bodySHA256=<hex sha256 of body> (or &...) and
                 answers the signed "url"; verify wants that URL.
  "method"       the HTTP method (hubspot; default "POST").
  "timestamp"    optional, the exact timestamp header value to sign instead of the one made
                 from "now" (unix seconds; hubspot: milliseconds).
  "private_key"  sign only. sendgrid: the P-256 private key, PKCS#8 PEM, base64 of its DER,
                 or its private scalar as 64 hex digits;
                 discord: the Ed25519 seed, 64 hex digits.
  "public_key"   verify only. sendgrid: base64 of the SPKI DER (as SendGrid's console shows
                 it); discord: the application's Ed25519 public key, 64 hex digits.
  "algorithm"    optional, twilio: "HMAC_SHA256" signs with a SharedKey and sends
                 X-Twilio-Webhooks-Signature-Settings (default: the Auth Token's HMAC_SHA1).
  "key_id"       optional, twilio with "algorithm": the SharedKey id named in that header.

The secrets: twilio the Auth Token (utf-8), square the subscription's signature key (utf-8),
hubspot the app's client secret (utf-8), adyen/adyen_payload the HMAC key (hex digits).

Libraries: twilio (form POST, params sorted and appended to the URL, HMAC-SHA1 base64),
twilio_json (JSON body: bodySHA256 query parameter, the URL alone signed), sendgrid (ECDSA
P-256 over timestamp + body), square (HMAC-SHA256 over URL + body), hubspot (v3: HMAC-SHA256
over method + URL + body + timestamp), discord (Ed25519 over timestamp + body), adyen (the
hmacSignature in each NotificationRequestItem's additionalData; sign answers the body with the
signatures added), adyen_payload (the HmacSignature header over the raw body).
"""
import base64
import contextlib
import hashlib
import hmac
import json
import sys
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlsplit, urlunsplit


def sign(spec):
    now = spec["now"]
    out = []
    for d in spec["deliveries"]:
        lib, secret, body = d["library"], d.get("secret"), d["body"]
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
        elif lib in NEW_SIGNERS:
            signed = NEW_SIGNERS[lib](d, now)
            out.append({"name": d["name"], **signed})
            continue
        else:
            raise SystemExit(f"unknown library {lib}")
        out.append({"name": d["name"], "headers": headers, "body": body})
    return out


def _timestamp(d, now, unit=1):
    return str(d["timestamp"]) if d.get("timestamp") is not None else str(now * unit)


def _sign_twilio(d, now):
    from twilio.request_validator import RequestValidator

    algorithm = d.get("algorithm")
    params = _MultiDict(parse_qs(d["body"], keep_blank_values=True))
    signature = RequestValidator(d["secret"]).compute_signature(d["url"], params, algorithm)
    headers = {"X-Twilio-Signature": signature}
    if algorithm:
        headers["X-Twilio-Webhooks-Signature-Settings"] = f"key={d.get('key_id', 'webhooks_sharedkey_interop')},algorithm={algorithm}"
    return {"headers": headers, "body": d["body"], "url": d["url"]}


def _sign_twilio_json(d, now):
    from twilio.request_validator import RequestValidator

    validator = RequestValidator(d["secret"])
    parts = urlsplit(d["url"])
    query = (parts.query + "&" if parts.query else "") + "bodySHA256=" + validator.compute_hash(d["body"])
    url = urlunsplit(parts._replace(query=query))
    headers = {"X-Twilio-Signature": validator.compute_signature(url, {}, d.get("algorithm"))}
    return {"headers": headers, "body": d["body"], "url": url}


def _sign_sendgrid(d, now):
    # The library only verifies; SendGrid signs timestamp + body with ECDSA P-256 / SHA-256 and
    # sends the DER signature in base64.
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = d["private_key"]
    if len(pem) == 64 and all(c in "0123456789abcdefABCDEF" for c in pem):
        key = ec.derive_private_key(int(pem, 16), ec.SECP256R1())
    elif "-----BEGIN" in pem:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    else:
        key = serialization.load_der_private_key(base64.b64decode(pem), password=None)
    ts = _timestamp(d, now)
    signature = key.sign((ts + d["body"]).encode("utf-8"), ec.ECDSA(hashes.SHA256()))
    headers = {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": ts,
    }
    return {"headers": headers, "body": d["body"]}


def _sign_square(d, now):
    # The SDK only verifies: base64 HMAC-SHA256 (signature key, utf-8) over notification URL + body.
    mac = hmac.new(d["secret"].encode("utf-8"), (d["url"] + d["body"]).encode("utf-8"), hashlib.sha256)
    headers = {"x-square-hmacsha256-signature": base64.b64encode(mac.digest()).decode()}
    return {"headers": headers, "body": d["body"], "url": d["url"]}


def _sign_hubspot(d, now):
    from hubspot.utils.signature import Signature

    ts = _timestamp(d, now, 1000)
    signature = Signature.get_signature(
        d["secret"], d["body"], "v3", http_uri=d["url"], http_method=d.get("method", "POST"), timestamp=ts
    )
    headers = {"X-HubSpot-Signature-v3": signature, "X-HubSpot-Request-Timestamp": ts}
    return {"headers": headers, "body": d["body"], "url": d["url"]}


def _sign_discord(d, now):
    # discord-interactions only verifies: Discord signs timestamp + body with Ed25519 (hex).
    from nacl.signing import SigningKey

    ts = _timestamp(d, now)
    signed = SigningKey(bytes.fromhex(d["private_key"])).sign(ts.encode() + d["body"].encode("utf-8"))
    headers = {"X-Signature-Ed25519": signed.signature.hex(), "X-Signature-Timestamp": ts}
    return {"headers": headers, "body": d["body"]}


def _sign_adyen(d, now):
    from Adyen.util import generate_notification_sig

    body = json.loads(d["body"])
    for item in body["notificationItems"]:
        item = item["NotificationRequestItem"]
        item.setdefault("additionalData", {})["hmacSignature"] = generate_notification_sig(item, d["secret"]).decode()
    return {"headers": {}, "body": json.dumps(body, ensure_ascii=False, separators=(",", ":"))}


def _sign_adyen_payload(d, now):
    from Adyen.util import generate_payload_sig

    signature = generate_payload_sig(d["body"].encode("utf-8"), d["secret"]).decode()
    return {"headers": {"HmacSignature": signature}, "body": d["body"]}


NEW_SIGNERS = {
    "twilio": _sign_twilio,
    "twilio_json": _sign_twilio_json,
    "sendgrid": _sign_sendgrid,
    "square": _sign_square,
    "hubspot": _sign_hubspot,
    "discord": _sign_discord,
    "adyen": _sign_adyen,
    "adyen_payload": _sign_adyen_payload,
}


class _MultiDict(dict):
    """parse_qs's {name: [values]} with the getall Twilio's validator uses for repeated names."""

    def __getitem__(self, name):
        return super().__getitem__(name)[-1]

    def getall(self, name):
        return super().__getitem__(name)


def _verify_new(lib, d, h):
    """Verifies one delivery for a NEW_SIGNERS library with the official verifier; returns the
    error or None. h: the headers with lower-case names."""
    body = d["body"]
    if lib in ("twilio", "twilio_json"):
        from twilio.request_validator import RequestValidator, get_signature_algorithm

        params = body if lib == "twilio_json" else _MultiDict(parse_qs(body, keep_blank_values=True))
        algorithm = get_signature_algorithm(h.get("x-twilio-webhooks-signature-settings"))
        ok = RequestValidator(d["secret"]).validate(d["url"], params, h.get("x-twilio-signature", ""), algorithm)
    elif lib == "sendgrid":
        from sendgrid.helpers.eventwebhook import EventWebhook

        ok = EventWebhook(d["public_key"]).verify_signature(
            body,
            h.get("x-twilio-email-event-webhook-signature"),
            h.get("x-twilio-email-event-webhook-timestamp"),
        )
    elif lib == "square":
        from square.utils.webhooks_helper import verify_signature

        ok = verify_signature(
            request_body=body,
            signature_header=h.get("x-square-hmacsha256-signature", ""),
            signature_key=d["secret"],
            notification_url=d["url"],
        )
    elif lib == "hubspot":
        from hubspot.utils.signature import Signature

        ok = Signature.is_valid(
            signature=h.get("x-hubspot-signature-v3", ""),
            client_secret=d["secret"],
            request_body=body,
            http_uri=d["url"],
            http_method=d.get("method", "POST"),
            signature_version="v3",
            timestamp=h.get("x-hubspot-request-timestamp"),
        )
    elif lib == "discord":
        from discord_interactions import verify_key

        # verify_key prints its exception on stdout, which carries our JSON answer.
        with contextlib.redirect_stdout(sys.stderr):
            ok = verify_key(
                body.encode("utf-8"), h.get("x-signature-ed25519", ""), h.get("x-signature-timestamp", ""), d["public_key"]
            )
    elif lib == "adyen":
        from Adyen.util import is_valid_hmac_notification

        # The library checks the first item of notificationItems only; every item is checked.
        items = json.loads(body)["notificationItems"]
        if not items:
            return "no notificationItems"
        for i, item in enumerate(items):
            if not is_valid_hmac_notification(item["NotificationRequestItem"], d["secret"]):
                return f"is_valid_hmac_notification is false for item {i}"
        return None
    elif lib == "adyen_payload":
        from Adyen.util import is_valid_hmac_payload

        ok = is_valid_hmac_payload(h.get("hmacsignature", ""), d["secret"], body.encode("utf-8"))
    else:
        raise SystemExit(f"unknown library {lib}")
    return None if ok else "the verifier returned False"


class _PaddleRequest:
    def __init__(self, headers, body):
        self.headers = headers
        self.body = body


def verify(deliveries):
    out = []
    for d in deliveries:
        lib, secret, body, headers = d["library"], d.get("secret"), d["body"], d["headers"]
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
            elif lib in NEW_SIGNERS:
                error = _verify_new(lib, d, {k.lower(): v for k, v in headers.items()})
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
