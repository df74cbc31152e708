-- When the current life of a ledger key began: its first claim, or the retake of the key once
-- it expired (a delivery past the source's retention is a new event: see shared::ledger::claim's
-- retake_expired). Re-drive and the redelivery of a dead letter keep it: they run the same life
-- of the event again. The outbox tells an event's messages of this life from those of an earlier
-- one by it (created_at >= life_started_at): a retaken key's targets get the event again, under
-- new numbers, while a re-run within one life queues nothing twice (shared::ledger::outbox's
-- ENQUEUE).
--
-- Rows claimed before this migration have had one life as far as anyone can tell: '-infinity'
-- (a constant default, so adding the column rewrites no row), then now() for new rows.
ALTER TABLE webhook_event ADD COLUMN life_started_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE webhook_event ALTER COLUMN life_started_at SET DEFAULT now();
