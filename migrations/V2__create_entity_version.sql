-- The generic ordering guard: the newest version applied per entity.
-- Advanced with INSERT ... ON CONFLICT DO UPDATE ... WHERE entity_version.version < EXCLUDED.version
-- RETURNING, in the same transaction as the effect; no row back means the event is stale.
CREATE TABLE entity_version (
    source      text        NOT NULL,
    entity_type text        NOT NULL,
    entity_id   text        NOT NULL,
    version     bigint      NOT NULL,
    -- The event that set this version.
    event_id    text        NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT entity_version_pkey PRIMARY KEY (source, entity_type, entity_id)
);
