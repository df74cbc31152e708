-- What a retry of the same event must match: SHA-256 over what the provider keeps stable across
-- its retries (per scheme; for Stripe every top-level member except pending_webhooks, each from
-- its raw bytes). payload_digest (the whole body) stays, for audit. NULL on rows claimed before
-- this column existed: those still compare payload_digest.
ALTER TABLE webhook_event
    ADD COLUMN payload_identity bytea,
    ADD CONSTRAINT webhook_event_payload_identity_length
        CHECK (payload_identity IS NULL OR octet_length(payload_identity) = 32);
