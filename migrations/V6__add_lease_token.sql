-- The lease's own fencing token, separate from attempts.
--
-- Every lease bumps lease_token; the worker's start, completion, failure and release are
-- guarded by status = 'processing' AND lease_token = <the token it leased with>, so a worker
-- whose lease expired and was taken over can no longer move the row. attempts now counts only
-- attempts that really started (the worker's start statement bumps it), so events leased in a
-- batch but never started (the worker was killed, or ran out of time) are not charged.
ALTER TABLE webhook_event
    ADD COLUMN lease_token bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT webhook_event_lease_token_non_negative CHECK (lease_token >= 0);
