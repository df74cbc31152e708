-- (b) The seeds' transaction shape: BEGIN; claim INSERT; business INSERT; UPDATE complete;
-- COMMIT, each statement its own round trip (no pipelining, no SET LOCAL), the same claim
-- and order statements as the receiver. Variables (-D, set by bench-limit) as in a-receiver.sql.
\set n :n + 1
\set id :run * 1000000000000 + :client_id * 1000000000 + :n
BEGIN;
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, status, payload_identity)
VALUES (:source, :id, :event_type, :digest, :payload, 'claimed', :identity)
ON CONFLICT (source, event_id) DO NOTHING
RETURNING 1;
INSERT INTO orders (order_id, total_minor, currency, source, event_id)
VALUES (:id, :amount, :currency, :source, :id)
ON CONFLICT (order_id) DO NOTHING;
UPDATE webhook_event
SET status = 'completed', attempts = attempts + 1, response_status = :status,
    response_body = :response, completed_at = now()
WHERE source = :source AND event_id = :id AND status = 'claimed';
COMMIT;
