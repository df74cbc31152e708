-- The auditor's stuck claims (shared::ledger::audit STUCK_SUMMARY and STUCK_KEYS): `claimed`
-- rows by age, with their source, read as an index-only scan.
--
-- It replaces webhook_event_incomplete_idx, `(claimed_at) WHERE completed_at IS NULL`, which
-- only those two queries used. That index also held every `dead`, `failed` and `processing` row,
-- and the queries had to read the heap to find the claims among them. On a 10M-row ledger
-- (25,000 dead letters, 2,000 claims) the stuck-claims half walked 28,500 index entries and
-- 2,500 heap pages, about 10 ms (`make bench-sweep BENCH_ARGS=--ten-million`,
-- bench/SWEEP.md). The receivers pay no more: each claim already went into the old index, and a
-- dead letter now stays out of this one.
--
-- CREATE INDEX without CONCURRENTLY: a migration runs in a transaction. It reads the whole table
-- once and writes an index the size of the claims only.
CREATE INDEX webhook_event_stuck_claim_idx ON webhook_event (claimed_at) INCLUDE (source)
    WHERE status = 'claimed';

DROP INDEX webhook_event_incomplete_idx;
