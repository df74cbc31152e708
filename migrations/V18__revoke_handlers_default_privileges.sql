-- The handlers role (hookledger_handlers: a group of the receiver, the worker and replay, the
-- internet-facing functions) is granted hookledger's own tables only (issue 24, item 5).
--
-- V14 gave it, in schema public, every table the migrating role would create from then on
-- (ALTER DEFAULT PRIVILEGES) and every table that role already owned: with the RDS master
-- user as the migrating role, another application's tables in the same database became
-- readable and writable by the receiver. From here on the migration runner grants it, after
-- each handlers' migration set, exactly the relations that set creates
-- (shared::db::MigrationSet::relations; the book's reference/database-roles.md), on every run,
-- so the handlers' tables revoked below are granted again by the same deploy, before it ends.
-- A later ledger migration creating a table no longer needs to revoke anything.
--
-- 1. The default privileges of every role this one can act for (V14 set them for the
--    migrating role of its day, possibly another login than today's).
DO $defaults$
DECLARE
    d record;
BEGIN
    FOR d IN
        SELECT DISTINCT pg_get_userbyid(da.defaclrole) AS owner
        FROM pg_default_acl da
        JOIN pg_namespace n ON n.oid = da.defaclnamespace
        CROSS JOIN LATERAL aclexplode(da.defaclacl) a
        WHERE n.nspname = 'public'
          AND a.grantee = 'hookledger_handlers'::regrole
          AND pg_has_role(current_user, da.defaclrole, 'USAGE')
    LOOP
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public '
                       'REVOKE ALL ON TABLES FROM hookledger_handlers', d.owner);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public '
                       'REVOKE ALL ON SEQUENCES FROM hookledger_handlers', d.owner);
    END LOOP;
END
$defaults$;

-- 2. Every grant to it in public but the ledger's two (V14: the ordering guard's tables).
DO $grants$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT DISTINCT c.oid::regclass AS name, c.relkind
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE n.nspname = 'public'
          AND a.grantee = 'hookledger_handlers'::regrole
          AND c.relname NOT IN ('entity_version', 'ordering_tie')
          AND pg_has_role(current_user, c.relowner, 'USAGE')
    LOOP
        IF t.relkind = 'S' THEN
            EXECUTE format('REVOKE ALL ON SEQUENCE %s FROM hookledger_handlers', t.name);
        ELSE
            EXECUTE format('REVOKE ALL ON TABLE %s FROM hookledger_handlers', t.name);
        END IF;
    END LOOP;
END
$grants$;
