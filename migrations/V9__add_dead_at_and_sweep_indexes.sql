-- Retention: the sweeper and the auditor read the ledger only through indexes.
--
-- dead_at: when the row went dead. Dead letters are kept for their own retention counted from
-- here (a deferred event can die days after its first delivery), and the auditor counts the
-- dead letters added since its last run by it. Rows already dead get their claimed_at (the
-- earliest they can have died), so they expire no later than before.
ALTER TABLE webhook_event ADD COLUMN dead_at timestamptz;

UPDATE webhook_event SET dead_at = claimed_at WHERE status = 'dead';

ALTER TABLE webhook_event
    ADD CONSTRAINT webhook_event_dead_at_matches_status
        CHECK ((status = 'dead') = (dead_at IS NOT NULL));

-- The sweep of completed keys walks one source's keys in claimed_at order from where its last
-- batch ended (source = $1 AND claimed_at >= $2 AND claimed_at < $cutoff ORDER BY claimed_at),
-- so each batch reads about the rows it deletes, and rows of a source with a longer retention
-- are never read. The auditor reads the oldest and newest key per source from it too, and
-- counts the completed keys past retention from it alone (status is INCLUDEd: an index-only
-- scan, where reading the heap for the status cost ~100 ms an audit at 10M rows, see
-- bench/SWEEP.md). It replaces the index on claimed_at alone (one index entry per insert, as
-- before, four bytes wider).
--
-- CREATE INDEX without CONCURRENTLY: a migration runs in a transaction. On a large ledger it
-- holds inserts for the build (deliveries wait up to lock_timeout, then get 503 and are
-- retried by the provider); on a ledger of many millions of rows, create
-- webhook_event_source_claimed_at_idx CONCURRENTLY by hand before deploying.
CREATE INDEX IF NOT EXISTS webhook_event_source_claimed_at_idx
    ON webhook_event (source, claimed_at) INCLUDE (status);

DROP INDEX webhook_event_claimed_at_idx;

-- Dead letters by source and age: the sweep of dead rows and the auditor's dead-letter
-- figures. Partial, so only dead rows have an entry (nothing on the hot path).
CREATE INDEX webhook_event_dead_idx ON webhook_event (source, dead_at)
    WHERE status = 'dead';

-- Ordering ties since a time (the auditor), resolved or not.
CREATE INDEX ordering_tie_seen_at_idx ON ordering_tie (seen_at);
