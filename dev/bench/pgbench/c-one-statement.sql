-- (c) The limit: ONE statement (autocommit, one round trip with -M prepared) with
-- data-modifying CTEs: the claim inserts the ledger row already completed with its response,
-- the order insert runs only when the claim inserted (gated on its RETURNING), and the
-- statement returns the stored response (NULL: the key existed, a duplicate).
-- Variables (-D, set by bench-limit) as in a-receiver.sql.
\set n :n + 1
\set id :run * 1000000000000 + :client_id * 1000000000 + :n
WITH claim AS (
    INSERT INTO webhook_event
        (source, event_id, event_type, payload_digest, payload, status, payload_identity,
         attempts, response_status, response_body, completed_at)
    VALUES (:source, :id, :event_type, :digest, :payload, 'completed', :identity,
            1, :status, :response, now())
    ON CONFLICT (source, event_id) DO NOTHING
    RETURNING response_body
), recorded AS (
    INSERT INTO orders (order_id, total_minor, currency, source, event_id)
    SELECT :id, :amount, :currency, :source, :id FROM claim
    ON CONFLICT (order_id) DO NOTHING
)
SELECT response_body::text FROM claim;
