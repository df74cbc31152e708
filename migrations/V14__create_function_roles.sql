-- One NOLOGIN group role per function, with exactly the privileges its SQL needs (README,
-- "Database roles"). Each function logs in as a LOGIN role that is a member of its group (the
-- migrate function provisions them on deploy from their secrets); the migrating role (the
-- owner) keeps everything else: DDL, the operator CLI.
--
-- Privileges on the ledger's tables, derived from the statements each function runs:
--
--   table           receiver   worker     sweeper                auditor   replay
--   webhook_event   S I U      S U        S D  U(last_error)     S         S I U
--   outbox          S I        S I U      S D  U(last_error)     S         S I U
--   audit_run       -          -          -                      S U       -
--   ordering_tie    (handlers) (handlers) -                      S         (handlers)
--   entity_version  (handlers) (handlers) -                      -         (handlers)
--
--   receiver  claim (INSERT ON CONFLICT), retakes of dead/expired keys, record_dead (INSERT
--             ON CONFLICT DO UPDATE), lookups, completion (UPDATE), deferred accept, outbox
--             ENQUEUE (reads the event's messages, inserts). Never DELETE.
--   worker    leases (SELECT FOR UPDATE SKIP LOCKED + UPDATE), start/fail/release/complete of
--             events and messages; its handlers enqueue messages (INSERT into outbox). Never
--             inserts an event, never DELETE.
--   sweeper   DELETE of expired keys and messages by batch, whose inner SELECT ... FOR UPDATE
--             SKIP LOCKED needs UPDATE on at least one column (PostgreSQL's GRANT: "SELECT ...
--             FOR UPDATE ... also require[s] this privilege on at least one column"): UPDATE of
--             last_error only, the one column nothing decides on. Never INSERT.
--   auditor   reads; locks and moves audit_run; sees other roles' idle transactions in
--             pg_stat_activity through pg_read_all_stats.
--   replay    the receive path (provider replay claims new events) plus re-drive (UPDATE of
--             dead events and messages) and inspect (reads). Never DELETE.
--   handlers  what the handlers' code needs: the ordering guard (entity_version, ordering_tie:
--             INSERT ... ON CONFLICT DO UPDATE, the tie's resolution) and the handlers' own
--             tables. Granted to receiver, worker and replay, which run handlers.
--
-- The handlers' own tables (handlers/migrations, the examples', a custom crate's) are created
-- after this, by the same migrating role: ALTER DEFAULT PRIVILEGES below grants them (and their
-- sequences) to hookledger_handlers as they are created, so a handler's migration needs no
-- GRANT. The other side of that default: a LATER LEDGER migration that creates a table must
-- REVOKE ALL ON it FROM hookledger_handlers (else the receiver could DELETE from it); the
-- end-to-end test roles::each_role_has_exactly_its_privileges_on_every_table fails until it does.
-- The migration runner revokes hookledger_handlers from each set's history table after the set ran.
--
-- Roles are cluster-wide, grants per database: several databases of one cluster may run this
-- at once, so each role is created when absent and a concurrent creator's duplicate_object or
-- unique_violation is swallowed. Creating roles needs CREATEROLE (the RDS master user has it).
DO $roles$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['hookledger_receiver', 'hookledger_worker', 'hookledger_sweeper',
                                'hookledger_auditor', 'hookledger_replay', 'hookledger_handlers']
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it first
            END;
        END IF;
    END LOOP;
END
$roles$;

-- Memberships (cluster-wide too): the functions that run handlers, and the auditor's view of
-- other sessions. pg_read_all_stats (not pg_monitor, which adds pg_read_all_settings and
-- pg_stat_scan_tables): PostgreSQL 15 lets a CREATEROLE role grant it, as the RDS master is.
DO $members$
DECLARE
    pair text[];
BEGIN
    FOREACH pair SLICE 1 IN ARRAY ARRAY[
        ['hookledger_handlers', 'hookledger_receiver'],
        ['hookledger_handlers', 'hookledger_worker'],
        ['hookledger_handlers', 'hookledger_replay'],
        ['pg_read_all_stats', 'hookledger_auditor']]
    LOOP
        IF NOT pg_has_role(pair[2], pair[1], 'MEMBER') THEN
            BEGIN
                EXECUTE format('GRANT %I TO %I', pair[1], pair[2]);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- granted concurrently
            END;
        END IF;
    END LOOP;
END
$members$;

-- Per database, in this database only.
GRANT SELECT, INSERT, UPDATE ON webhook_event TO hookledger_receiver;
GRANT SELECT, INSERT ON outbox TO hookledger_receiver;

GRANT SELECT, UPDATE ON webhook_event TO hookledger_worker;
GRANT SELECT, INSERT, UPDATE ON outbox TO hookledger_worker;

GRANT SELECT, DELETE, UPDATE (last_error) ON webhook_event TO hookledger_sweeper;
GRANT SELECT, DELETE, UPDATE (last_error) ON outbox TO hookledger_sweeper;

GRANT SELECT ON webhook_event, outbox, ordering_tie TO hookledger_auditor;
GRANT SELECT, UPDATE ON audit_run TO hookledger_auditor;

GRANT SELECT, INSERT, UPDATE ON webhook_event TO hookledger_replay;
GRANT SELECT, INSERT, UPDATE ON outbox TO hookledger_replay;

GRANT SELECT, INSERT, UPDATE ON entity_version, ordering_tie TO hookledger_handlers;

-- Handlers' tables created from now on by the migrating role (see above).
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO hookledger_handlers;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO hookledger_handlers;

-- Handlers' tables created before this migration: every table of the migrating role that is
-- not the ledger's (tables of other owners, e.g. another application's, are left alone).
DO $existing$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS name, c.relkind
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public'
          AND c.relkind IN ('r', 'p', 'S')
          AND c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
          AND c.relname NOT IN ('webhook_event', 'entity_version', 'ordering_tie', 'audit_run',
                                'outbox', 'refinery_schema_history')
          AND c.relname NOT LIKE 'hookledger\_%\_schema\_history'
    LOOP
        IF t.relkind = 'S' THEN
            EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %s TO hookledger_handlers', t.name);
        ELSE
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO hookledger_handlers',
                           t.name);
        END IF;
    END LOOP;
END
$existing$;
