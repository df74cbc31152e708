-- Replay and re-drive (shared::replay, shared::redrive).
--
-- replayed_at: set when the row was created by replay from the provider's API (Stripe
-- `GET /v1/events`, Paddle `GET /events`) rather than by a signed delivery; NULL for every
-- delivery. A GitHub redelivery is a signed delivery and leaves it NULL.
--
-- history: what operators did to the row, oldest first, as a JSON array of objects. A re-drive
-- of a dead letter appends {"action": "redrive", "at", "status": "dead", "attempts",
-- "last_error", "dead_at", "claimed_at", "response"}; a re-run of an ignored event appends {"action": "rerun_ignored",
-- "at", "status": "completed", "response", "completed_at", "claimed_at"}. NULL until the first action.
--
-- Both are nullable without a default: ADD COLUMN only changes the catalogue (no table rewrite,
-- a brief ACCESS EXCLUSIVE lock), so the receivers are not held up on a large ledger.
ALTER TABLE webhook_event ADD COLUMN replayed_at timestamptz;
ALTER TABLE webhook_event ADD COLUMN history jsonb;
