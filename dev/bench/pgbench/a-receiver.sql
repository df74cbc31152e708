-- (a) What the receiver sends for ONE new event (the inline Stripe payment_intent.succeeded
-- delivery through shared::Receiver::receive, whose example handler is plain SQL), as of the
-- commit this file is in: ONE statement (shared::ledger::one_statement), sent alone because
-- the limits live on the database role (HOOKLEDGER_DB_TRANSACTION_LIMITS=false, what the deploy
-- provisions): the claim inserts the row already completed, the handler's order insert is
-- rewritten to select FROM claimed (gated on the claim), and a lost claim's existing row comes
-- back from the same statement.
-- `bench-limit limit` checks this file against what the receiver really issues
-- (pg_stat_statements, calls per event by statement) and flags a mismatch in limit.md:
-- when the receive path changes, update this file to match.
-- Variables (-D, set by bench-limit): n=0, run, digest, payload, identity, amount, response.
\set n :n + 1
\set id :run * 1000000000000 + :client_id * 1000000000 + :n
WITH claimed AS (
    INSERT INTO webhook_event
        (source, event_id, event_type, payload_digest, payload, status, payload_identity,
         attempts, response_status, response_body, completed_at)
    VALUES (:source, :id, :event_type, :digest, :payload, 'completed', :identity, 1, :status, :response, now())
    ON CONFLICT (source, event_id) DO NOTHING
    RETURNING response_body::text AS body
),
w1 AS (
INSERT INTO orders (order_id, total_minor, currency, source, event_id)
SELECT :id, :amount, :currency, :source, :id FROM claimed
ON CONFLICT (order_id) DO NOTHING
)
SELECT NULL::text, NULL::bytea, NULL::smallint, NULL::text, NULL::bytea, NULL::timestamptz,
       NULL::timestamptz, NULL::boolean, true AS won, body
FROM claimed
UNION ALL
SELECT status::text, payload_digest, response_status, response_body::text, payload_identity,
       claimed_at, dead_at, replayed_at IS NOT NULL, false, NULL
FROM webhook_event
WHERE source = :source
  AND event_id = :id
  AND NOT EXISTS (SELECT 1 FROM claimed);
