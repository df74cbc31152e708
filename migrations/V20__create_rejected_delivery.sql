-- Rejected deliveries, counted per source, reason and hour: the receiver's refusals (a bad
-- signature, an unknown source, a body too large, an event id reused with another body, a
-- request it cannot read) leave no ledger row, so without this "why is Stripe failing since the
-- rotation?" could be answered from the logs only. shared::rejected holds its statements.
--
-- Who moves a row:
--   receiver  after the answer to a rejected delivery is decided, one upsert: the row of
--             (source, reason, the hour now) is inserted with count 1, or its count goes up by
--             one and last_at moves to now. A failure to count is a warning log line; the
--             answer the provider gets never changes. An accepted delivery writes nothing here.
--   sweeper   deletes the buckets that started longer ago than HOOKLEDGER_REJECTED_RETENTION_DAYS
--             (default 30), in the same bounded batches as its other work.
--   console, `hookledger rejected`: read it.
--
-- Bounded by construction: `source` is a configured source's name, or '(unknown)' for every
-- name a path gave that is not configured (the path segment is the sender's choice: a row per
-- name would let anyone grow the table); `reason` is one of the receive path's five fixed
-- outcome names; `bucket` is an hour. So at most (configured sources + 1) x 5 rows an hour,
-- for the retention.
CREATE TABLE rejected_delivery (
    -- A configured source's name ([a-z0-9_-], 1 to 64 characters), or '(unknown)'.
    source  text        NOT NULL,
    -- The delivery's outcome (shared::receive::Outcome): the answer's status in brackets.
    reason  text        NOT NULL,
    -- The hour (UTC) the deliveries were rejected in: date_trunc('hour', at, 'UTC').
    bucket  timestamptz NOT NULL,
    count   bigint      NOT NULL,
    -- The latest rejection counted in the bucket.
    last_at timestamptz NOT NULL,
    CONSTRAINT rejected_delivery_pkey PRIMARY KEY (source, reason, bucket),
    CONSTRAINT rejected_delivery_source CHECK (
        source = '(unknown)' OR source ~ '^[a-z0-9_-]{1,64}$'),
    CONSTRAINT rejected_delivery_reason CHECK (reason IN (
        'unauthorized',     -- 401: a bad, missing or stale signature
        'unknown_source',   -- 404: the path names no configured source
        'too_large',        -- 413: a body over the source's limit
        'digest_mismatch',  -- 409: an event id seen before with another body
        'bad_request')),    -- 400: a body or request that cannot be read or identified
    -- Only an unknown source is refused as one.
    CONSTRAINT rejected_delivery_unknown CHECK (
        reason <> 'unknown_source' OR source = '(unknown)'),
    CONSTRAINT rejected_delivery_count CHECK (count > 0),
    CONSTRAINT rejected_delivery_last_at CHECK (
        last_at >= bucket AND last_at < bucket + interval '1 hour')
);

-- The sweeper's batches (oldest buckets first) and the readers' windows (the last day, week).
-- The upsert never changes `bucket`, so its updates stay HOT.
CREATE INDEX rejected_delivery_bucket_idx ON rejected_delivery (bucket);

-- Privileges (see V14 and docs/reference/database-roles.md). The receiver's upsert reads the
-- count it raises (SELECT) besides inserting and updating; the sweeper deletes old buckets,
-- never locking a row (no upsert touches an old bucket) so it needs no UPDATE; the console
-- reads it as the auditor (read-only) or as replay (re-drive on).
GRANT SELECT, INSERT, UPDATE ON rejected_delivery TO hookledger_receiver;
GRANT SELECT, DELETE ON rejected_delivery TO hookledger_sweeper;
GRANT SELECT ON rejected_delivery TO hookledger_auditor, hookledger_replay;
