-- Erasure that keeps deduplication (issue 28, `hookledger forget`).
--
-- subject_hash: a keyed hash (HMAC-SHA256 under the source's subject key) of the data
-- subject's identifier the payload names (the source's `subject` pointers, e.g. a Stripe
-- customer id), set by the claim; NULL when the source has no `subject` or the payload names
-- none. Erasure by subject looks it up through webhook_event_subject_idx instead of scanning
-- payloads. The identifier itself is never stored.
--
-- erased_at: when the event's payload, stored response and earlier answers were erased; the
-- key, status, digests and times stay, so a redelivery is still answered as a duplicate. Who
-- erased it and why is the last entry of `history`.
ALTER TABLE webhook_event
    ADD COLUMN subject_hash bytea,
    ADD COLUMN erased_at timestamptz,
    ADD CONSTRAINT webhook_event_subject_hash_length
        CHECK (subject_hash IS NULL OR octet_length(subject_hash) = 32);

-- Partial: sources without a subject add no index entry per event. Without CONCURRENTLY (a
-- migration runs in a transaction); the column is new, so the index starts empty.
CREATE INDEX IF NOT EXISTS webhook_event_subject_idx
    ON webhook_event (source, subject_hash)
    WHERE subject_hash IS NOT NULL;
