-- One index for all due work. The lease now also sets next_attempt_at to the lease's expiry,
-- so "claimed or failed and due" and "processing with an expired lease" become one range
-- predicate (status IN (...) AND next_attempt_at <= now) that this partial index serves in
-- order. The previous index could not serve the OR of the two, and the lease read the whole
-- ledger.
DROP INDEX webhook_event_due_idx;

CREATE INDEX webhook_event_due_idx ON webhook_event (next_attempt_at)
    WHERE status IN ('claimed', 'failed', 'processing');
