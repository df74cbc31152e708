-- The auditor's memory: when its last recorded run happened, so "dead letters added since the
-- last run" and "ordering ties since the last run" cover each moment exactly once.
--
-- One row, created here with last_run_at NULL (never run). A run locks it (SELECT ... FOR
-- UPDATE), counts over [last_run_at, now) and moves it to now in the same transaction, so two
-- audits at once take turns instead of counting the same window twice. The first run counts
-- over the five minutes before it (the schedule's period), not over all history: the totals
-- (dead_letters) already show what was there before.
CREATE TABLE audit_run (
    id          boolean     PRIMARY KEY DEFAULT true,
    last_run_at timestamptz,
    CONSTRAINT audit_run_single_row CHECK (id)
);

INSERT INTO audit_run (id, last_run_at) VALUES (true, NULL);

-- Expired leases (the auditor's stuck figure): processing rows by lease expiry. Only the
-- worker's lease puts a row in it (the receiver never writes 'processing', so deliveries pay
-- nothing), and it holds only the events in flight. Without it, finding the processing rows
-- among the due ones reads the whole due backlog, which is largest exactly when the auditor
-- is needed.
CREATE INDEX webhook_event_processing_idx ON webhook_event (lease_expires_at)
    WHERE status = 'processing';

-- Every other auditor query is served by an existing index (the end-to-end test
-- audit_queries_are_served_by_indexes checks the plans on a million rows):
--   stuck claims        webhook_event_incomplete_idx (claimed_at) WHERE completed_at IS NULL,
--                       or webhook_event_due_idx (unfinished rows), as the planner prefers
--   deferred backlog    webhook_event_due_idx (next_attempt_at) WHERE status IN (...)
--   oldest/newest key   webhook_event_source_claimed_at_idx (source, claimed_at), both ways
--   past retention      webhook_event_source_claimed_at_idx; webhook_event_dead_idx
--   dead letters        webhook_event_dead_idx (source, dead_at) WHERE status = 'dead'
--   ordering ties       ordering_tie_seen_at_idx (seen_at)
-- A (source, claimed_at) index on claimed rows would make the stuck-claim figures exact per
-- source under the cap, but every claim inserts a 'claimed' row, so every delivery would pay
-- for it.
