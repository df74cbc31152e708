-- The transactional outbox: messages for effects that cannot roll back (an HTTP call, a queue, a
-- bus), written in the same transaction as the claim and the business writes, or not at all, and
-- dispatched by the worker after commit.
--
-- Who moves a row in and out of each status:
--   pending     the claim's transaction (a handler's tx.outbox, or a source's built-in target);
--               the worker after a retryable failure, due again at next_attempt_at.
--   processing  the worker (lease) until lease_expires_at; left by delivered/pending/dead, or
--               re-leased by another worker once the lease expired (a worker died mid-dispatch).
--   delivered   the worker: the target answered success.
--   dead        the worker: a fatal answer, or max_attempts used; kept for an operator to
--               re-drive (hookledger redrive --outbox).
CREATE TYPE outbox_status AS ENUM ('pending', 'processing', 'delivered', 'dead');

CREATE TABLE outbox (
    -- The event that wrote the message: its ledger key, and the message's number within the
    -- event's transaction (1, 2, ...: the source's built-in targets first, in configuration
    -- order, then the handler's messages in the order it added them).
    source            text          NOT NULL,
    event_id          text          NOT NULL,
    -- The key is also the message's idempotency key, `{source}:{event_id}:{n}` (source names
    -- have no `:`), which is what a downstream deduplicates on; a re-run of the same event
    -- (re-drive, shadow mode) inserts with ON CONFLICT DO NOTHING, so it never queues a second
    -- copy of a message. Keyed like webhook_event (the distribution key candidate).
    n                 integer       NOT NULL CHECK (n >= 1),
    event_type        text          NOT NULL,
    -- The target's name in the source's configuration ("targets": [{"name": ...}]).
    target            text          NOT NULL,
    -- The message body, and its media type (application/json for a handler's messages; the
    -- provider's own body and type for a built-in target).
    payload           bytea         NOT NULL,
    content_type      text          NOT NULL,
    status            outbox_status NOT NULL DEFAULT 'pending',
    -- Dispatch attempts that really started.
    attempts          integer       NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz   NOT NULL DEFAULT now(),
    -- Fencing token, bumped by every lease; lease_expires_at is set while processing.
    lease_token       bigint        NOT NULL DEFAULT 0,
    lease_expires_at  timestamptz,
    -- The last attempt's error (NULL once delivered) and the target's status code (HTTP), for
    -- operators.
    last_error        text,
    last_status       smallint,
    created_at        timestamptz   NOT NULL DEFAULT now(),
    delivered_at      timestamptz,
    dead_at           timestamptz,
    -- Operator actions (re-drive), oldest first, as in webhook_event.history.
    history           jsonb,
    CONSTRAINT outbox_delivered_at_matches_status
        CHECK ((status = 'delivered') = (delivered_at IS NOT NULL)),
    CONSTRAINT outbox_dead_at_matches_status
        CHECK ((status = 'dead') = (dead_at IS NOT NULL)),
    PRIMARY KEY (source, event_id, n)
);

-- Due messages, oldest first: pending ones whose time has come and processing ones whose lease
-- expired (leasing sets next_attempt_at to the lease's expiry, as for webhook_event). Partial,
-- so delivered and dead messages have no entry. source and created_at are INCLUDEd so the
-- auditor's backlog figure (count and oldest per source) is an index-only scan.
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at) INCLUDE (source, created_at)
    WHERE status IN ('pending', 'processing');

-- Dead messages by source and age (the auditor, re-drive by window, the sweep).
CREATE INDEX outbox_dead_idx ON outbox (source, dead_at) WHERE status = 'dead';

-- Delivered messages by source and age (the sweep).
CREATE INDEX outbox_delivered_idx ON outbox (source, delivered_at) WHERE status = 'delivered';
