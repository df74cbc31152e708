-- The replay guard (issue 24): one event per verified body, per source, for the schemes whose
-- event id or type is not covered by the signature.
--
-- GitHub and Shopify sign the body only; the event id and type come from headers
-- (X-GitHub-Delivery / X-GitHub-Event, X-Shopify-Event-Id / X-Shopify-Topic), and no timestamp
-- is signed. Anyone who once saw a signed delivery could send its body and signature again with
-- a fresh id (a new event, handled and forwarded) or another topic (another handler). The
-- receiver sets replay_guard to the body's SHA-256 (payload_digest) for those deliveries, and to
-- a generic HMAC source's that reads its id or type from a header; NULL for every scheme that
-- signs them (Stripe, Slack, Paddle, Standard Webhooks) and for rows replay fetched from a
-- provider's API. The claim's INSERT names no conflict target, so a second row with the same
-- body under another id conflicts on this index in the same statement, and is answered as a
-- duplicate of the first (outcome body_replayed): no extra round trip on any delivery.
--
-- The guard lives on the ledger row, so it lasts as long as the row: the source's retention
-- (the sweep deletes the row and its guard together). A legitimate redelivery keeps its id and
-- its body, and is the same row as before.
--
-- Existing rows keep NULL: a body received before this migration is not guarded.
--
-- Adding a nullable column without a default is a catalog change only; the CHECK is NOT VALID
-- (every existing row is NULL, so there is nothing to validate, and a validating scan would hold
-- the table's ACCESS EXCLUSIVE lock while it reads it); new and updated rows are checked.
-- CREATE INDEX without
-- CONCURRENTLY: a migration runs in a transaction. It reads the whole table once (and blocks
-- writes while it does) but writes an empty index, every existing row being NULL. On a ledger of
-- many millions of rows create webhook_event_replay_guard_key CONCURRENTLY by hand before
-- deploying (deliveries otherwise wait on the build, up to lock_timeout).
ALTER TABLE webhook_event
    ADD COLUMN replay_guard bytea,
    ADD CONSTRAINT webhook_event_replay_guard_is_the_digest
        CHECK (replay_guard IS NULL OR replay_guard = payload_digest) NOT VALID;

CREATE UNIQUE INDEX IF NOT EXISTS webhook_event_replay_guard_key
    ON webhook_event (source, replay_guard)
    WHERE replay_guard IS NOT NULL;
