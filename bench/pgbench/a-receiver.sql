-- (a) What the receiver sends for ONE new event, in its transaction shape (the inline
-- Stripe payment_intent.succeeded delivery through shared::Receiver::receive, as of the
-- commit this file is in). Two round trips: pipeline 1 = the BEGIN with its SET LOCALs
-- (the receiver sends them as one simple query; pgbench -M prepared cannot, so they are
-- separate messages in the same pipeline, the same statements and still one round trip)
-- and the claim INSERT (shared::ledger::claim::CLAIM); pipeline 2 = the handler's deferred
-- order INSERT, the completion (COMPLETE in shared/src/ledger/tx.rs) and COMMIT.
-- `bench-limit limit` checks this file against what the receiver really issues
-- (pg_stat_statements, calls per event by statement) and flags a mismatch in limit.md:
-- when the receive path changes, update this file to match.
-- Variables (-D, set by bench-limit): n=0, run, digest, payload, identity, amount, response.
\set n :n + 1
\set id :run * 1000000000000 + :client_id * 1000000000 + :n
\startpipeline
BEGIN;
SET LOCAL statement_timeout = 5000;
SET LOCAL lock_timeout = 2000;
SET LOCAL idle_in_transaction_session_timeout = 10000;
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, status, payload_identity,
     replayed_at)
VALUES (:source, :id, :event_type, :digest, :payload, 'claimed', :identity, CASE WHEN :replayed THEN now() END)
ON CONFLICT (source, event_id) DO NOTHING
RETURNING 1;
\endpipeline
\startpipeline
INSERT INTO orders (order_id, total_minor, currency, source, event_id)
VALUES (:id, :amount, :currency, :source, :id)
ON CONFLICT (order_id) DO NOTHING;
WITH done AS (
    UPDATE webhook_event
    SET status = 'completed',
        attempts = attempts + 1,
        response_status = :status,
        response_body = :response,
        completed_at = now()
    WHERE source = :source
      AND event_id = :id
      AND status = 'claimed'
    RETURNING response_body::text AS body
)
SELECT (SELECT body FROM done) AS body,
       1 / (SELECT count(*) FROM done) AS owned;
COMMIT;
\endpipeline
