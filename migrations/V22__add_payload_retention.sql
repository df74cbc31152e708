-- Payload retention shorter than key retention (issue 28): a source's `payload_retention_hours`
-- lets the sweeper drop a completed event's raw payload and the response it stored, while the
-- key, status, digests, times and history stay (deduplication, replay judgement and the audit
-- trail keep working).
--
-- When the sweeper dropped them: NULL while the payload is kept (every row before this
-- migration, and every row of a source without payload retention). A nullable column without
-- a default: PostgreSQL adds it without rewriting the table, and it carries no index, so a new
-- event costs nothing more.
ALTER TABLE webhook_event ADD COLUMN payload_dropped_at timestamptz;

-- The same for a delivered outbox message's payload (a copy of the verified body, or what a
-- handler wrote): emptied (payload = '') once delivered longer ago than the source's payload
-- retention; pending, processing and dead messages keep theirs (dispatch and re-drive need it).
ALTER TABLE outbox ADD COLUMN payload_dropped_at timestamptz;

-- How far each source's payloads have been dropped: the sweeper walks a source's completed
-- rows by claimed_at (webhook_event_source_claimed_at_idx) from here, never the rows it already
-- emptied, and moves it forward in the same transaction as each batch. It never passes a row
-- that is still pending (claimed, processing or failed), so a row that completes late is
-- dropped after it completes; a dead letter re-driven later is claimed anew (claimed_at = now)
-- and so comes after it again.
-- `messages_swept_until` is the same for delivered outbox messages, by delivered_at
-- (outbox_delivered_idx): a message is delivered once, so none comes back behind it.
CREATE TABLE payload_sweep (
    source               text        PRIMARY KEY,
    swept_until          timestamptz,
    messages_swept_until timestamptz
);

-- Privileges (see V14 and docs/reference/database-roles.md): the sweeper empties the payload
-- and the stored response, and keeps its own watermark; the auditor and replay read it.
GRANT UPDATE (payload, response_body, payload_dropped_at) ON webhook_event TO hookledger_sweeper;
GRANT UPDATE (payload, payload_dropped_at) ON outbox TO hookledger_sweeper;
GRANT SELECT, INSERT, UPDATE ON payload_sweep TO hookledger_sweeper;
GRANT SELECT ON payload_sweep TO hookledger_auditor, hookledger_replay;
