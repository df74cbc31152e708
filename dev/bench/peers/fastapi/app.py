"""The peer: a Stripe webhook endpoint written the way the popular guides write it.

FastAPI + asyncpg under uvicorn. POST /webhooks/stripe reads the raw body, verifies the
Stripe-Signature header (HMAC-SHA256 over "{t}.{body}", compared with hmac.compare_digest,
300 s tolerance), parses the JSON, and in one transaction claims the event id with
INSERT ... ON CONFLICT (source, event_id) DO NOTHING RETURNING. A duplicate is answered with
the stored response; a new event records the order, stores the response on the ledger row
(status completed) and commits, then returns it.

Environment: DATABASE_URL, STRIPE_WEBHOOK_SECRET, PEER_SOURCE (the ledger's source value,
default peer-stripe), PEER_POOL_SIZE (asyncpg pool maximum per worker, default 32).
Run: uvicorn app:app --workers 2 --host 127.0.0.1 --port 8000 --log-level warning
"""

import hashlib
import hmac
import json
import os
import time
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

WEBHOOK_SECRET = os.environ["STRIPE_WEBHOOK_SECRET"]
SOURCE = os.environ.get("PEER_SOURCE", "peer-stripe")
TOLERANCE_SECONDS = 300


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.pool = await asyncpg.create_pool(
        os.environ["DATABASE_URL"],
        min_size=1,
        max_size=int(os.environ.get("PEER_POOL_SIZE", "32")),
    )
    yield
    await app.state.pool.close()


app = FastAPI(lifespan=lifespan)


def verify_signature(payload: bytes, header: str, secret: str) -> bool:
    timestamp = None
    signatures = []
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        if key == "t":
            timestamp = value
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        return False
    try:
        if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
            return False
    except ValueError:
        return False
    signed_payload = timestamp.encode() + b"." + payload
    expected = hmac.new(secret.encode(), signed_payload, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, s) for s in signatures)


@app.post("/webhooks/stripe")
async def stripe_webhook(request: Request):
    payload = await request.body()
    header = request.headers.get("stripe-signature", "")
    if not verify_signature(payload, header, WEBHOOK_SECRET):
        return JSONResponse({"error": "invalid signature"}, status_code=400)
    try:
        event = json.loads(payload)
        event_id = event["id"]
        event_type = event["type"]
    except (ValueError, KeyError, TypeError):
        return JSONResponse({"error": "invalid payload"}, status_code=400)

    async with app.state.pool.acquire() as conn:
        async with conn.transaction():
            claimed = await conn.fetchval(
                """
                INSERT INTO webhook_event (source, event_id, event_type, payload_digest, payload)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (source, event_id) DO NOTHING
                RETURNING event_id
                """,
                SOURCE,
                event_id,
                event_type,
                hashlib.sha256(payload).digest(),
                payload,
            )
            if claimed is None:
                # Already seen: answer what the first delivery was answered.
                row = await conn.fetchrow(
                    "SELECT status, response_status, response_body FROM webhook_event "
                    "WHERE source = $1 AND event_id = $2",
                    SOURCE,
                    event_id,
                )
                if row is not None and row["status"] == "completed":
                    return JSONResponse(
                        json.loads(row["response_body"]), status_code=row["response_status"]
                    )
                return JSONResponse({"error": "event in progress"}, status_code=409)

            response = {"received": True, "duplicate": False}
            if event_type == "payment_intent.succeeded":
                intent = event["data"]["object"]
                order_id = (intent.get("metadata") or {}).get("order_id") or intent["id"]
                total = intent.get("amount_received") or intent["amount"]
                await conn.execute(
                    """
                    INSERT INTO orders (order_id, total_minor, currency, source, event_id)
                    VALUES ($1, $2, $3, $4, $5)
                    ON CONFLICT (order_id) DO NOTHING
                    """,
                    order_id,
                    total,
                    intent["currency"],
                    SOURCE,
                    event_id,
                )
            await conn.execute(
                """
                UPDATE webhook_event
                SET status = 'completed', attempts = attempts + 1, response_status = $3,
                    response_body = $4, completed_at = now()
                WHERE source = $1 AND event_id = $2
                """,
                SOURCE,
                event_id,
                200,
                json.dumps(response),
            )
    return JSONResponse(response)
