-- The ledger: one row per logical event, keyed by (source, event_id).
--
-- The primary key is the concurrency control: a second INSERT of the same key blocks on the
-- first's uncommitted tuple and sees the conflict when it commits (ON CONFLICT DO NOTHING).
-- Never partition this table by time: the unique key must stay global.

-- Who moves a row in and out of each status:
--   claimed     receiver (claim); inline mode completes it in the same transaction, so only
--               deferred rows are ever committed as claimed. Left by the worker's lease.
--   processing  worker (lease) until lease_expires_at; left by complete/fail, or re-leased
--               by another worker once the lease has expired.
--   completed   receiver (inline) or worker: the business effect and the response are durable.
--   failed      worker, after a handler error: retried at next_attempt_at.
--   dead        worker, attempts exhausted: kept for a human (and replay's re-drive).
CREATE TYPE event_status AS ENUM ('claimed', 'processing', 'completed', 'failed', 'dead');

CREATE TABLE webhook_event (
    source           text         NOT NULL,
    event_id         text         NOT NULL,
    event_type       text         NOT NULL,
    -- SHA-256 of the raw body: a retry must carry the same bytes.
    payload_digest   bytea        NOT NULL,
    -- The raw body, for audit, deferred processing and ledger replay; NULL when the source
    -- keeps the digest only.
    payload          bytea,
    status           event_status NOT NULL DEFAULT 'claimed',
    attempts         integer      NOT NULL DEFAULT 0,
    last_error       text,
    response_status  smallint,
    response_body    jsonb,
    claimed_at       timestamptz  NOT NULL DEFAULT now(),
    lease_expires_at timestamptz,
    next_attempt_at  timestamptz,
    completed_at     timestamptz,
    CONSTRAINT webhook_event_pkey PRIMARY KEY (source, event_id),
    CONSTRAINT webhook_event_source_length CHECK (length(source) BETWEEN 1 AND 64),
    CONSTRAINT webhook_event_event_id_length CHECK (length(event_id) BETWEEN 1 AND 255),
    CONSTRAINT webhook_event_payload_digest_length CHECK (octet_length(payload_digest) = 32),
    CONSTRAINT webhook_event_attempts_non_negative CHECK (attempts >= 0),
    -- completed_at is set exactly when the row is completed ...
    CONSTRAINT webhook_event_completed_at_matches_status
        CHECK ((status = 'completed') = (completed_at IS NOT NULL)),
    -- ... and a completed row always carries the response every retry is answered with.
    CONSTRAINT webhook_event_completed_has_response
        CHECK (status <> 'completed' OR (response_status IS NOT NULL AND response_body IS NOT NULL)),
    CONSTRAINT webhook_event_processing_has_lease
        CHECK (status <> 'processing' OR lease_expires_at IS NOT NULL),
    CONSTRAINT webhook_event_failed_has_next_attempt
        CHECK (status <> 'failed' OR next_attempt_at IS NOT NULL)
);

-- The sweeper deletes by age in bounded batches (ORDER BY claimed_at LIMIT n).
CREATE INDEX webhook_event_claimed_at_idx ON webhook_event (claimed_at);

-- Due work for the worker's lease.
CREATE INDEX webhook_event_due_idx ON webhook_event (next_attempt_at)
    WHERE status IN ('claimed', 'failed');

-- Claims that never completed, for the auditor.
CREATE INDEX webhook_event_incomplete_idx ON webhook_event (claimed_at)
    WHERE completed_at IS NULL;
