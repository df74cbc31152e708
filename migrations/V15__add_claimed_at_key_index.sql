-- The console's events list (hookledger console, console/src/queries.rs EVENTS): the ledger
-- newest first across every source, by (claimed_at, source, event_id), paged by keyset (the
-- next page is `(claimed_at, source, event_id) < the last row's`, never OFFSET), with the time
-- range (claimed_at) and the other filters (status, event type, id prefix) checked on the rows
-- it reads. webhook_event_source_claimed_at_idx serves one source's list, but not the list of
-- all sources in time order nor a time range over all sources: without this index either was a
-- sequential scan of the whole ledger and a sort.
--
-- One index, not one per filter: every insert of the receiver pays one more index entry (this
-- one: a timestamp and the key). Status and event type are not in it: a dead-letter list has
-- its own partial index (webhook_event_dead_idx), and an event type alone is rare enough in
-- an operator's questions to be read through the time order.
--
-- CREATE INDEX without CONCURRENTLY: a migration runs in a transaction. On a ledger of many
-- millions of rows create webhook_event_claimed_at_key_idx CONCURRENTLY by hand before
-- deploying (deliveries otherwise wait on the build, up to lock_timeout).
CREATE INDEX IF NOT EXISTS webhook_event_claimed_at_key_idx
    ON webhook_event (claimed_at, source, event_id);
