-- Ordering ties: two different events carrying the same version of one entity (one-second
-- timestamps). The guard cannot tell which is newer, so a tie is never silently dropped: the
-- handler resolves it (e.g. re-fetches the object from the provider) or it stays here, listed for
-- operators, with the event that had set the version and the one that tied with it.
CREATE TABLE ordering_tie (
    source           text        NOT NULL,
    entity_type      text        NOT NULL,
    entity_id        text        NOT NULL,
    version          bigint      NOT NULL,
    -- The event whose state is applied.
    applied_event_id text        NOT NULL,
    -- The event that tied with it.
    event_id         text        NOT NULL,
    -- Whether the handler resolved it (re-fetched the authoritative state and wrote it).
    resolved         boolean     NOT NULL DEFAULT false,
    seen_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ordering_tie_pkey PRIMARY KEY (source, entity_type, entity_id, version, event_id)
);

-- Unresolved ties, oldest first, for the auditor and operators.
CREATE INDEX ordering_tie_unresolved_idx ON ordering_tie (seen_at) WHERE NOT resolved;
