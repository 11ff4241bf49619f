-- Least privilege (issue 38 item 7): the API and the workers log in as `waystation_api` and
-- `waystation_worker` themselves, instead of as the migrating owner (a superuser on the
-- embedded server and in docker-compose) that only `SET ROLE`d: `RESET ROLE` undid that, and
-- the owner passes row-level security. The two roles (migration 022) are NOBYPASSRLS, not
-- superusers, own no table and may not create in the schema; only the owner migrates.
-- Passwords are not migrations' business: `waystation migrate` sets them from
-- WAYSTATION_API_DATABASE_PASSWORD / WAYSTATION_WORKER_DATABASE_PASSWORD when given.

-- A migrating role without CREATEROLE (a managed database's) may not change roles: an
-- administrator grants LOGIN (docs/security.md says how), and the migration goes on.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['waystation_api', 'waystation_worker'] LOOP
        BEGIN
            EXECUTE format('ALTER ROLE %I LOGIN', r);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'role % may not be given LOGIN by %: an administrator must', r,
                current_user;
        END;
    END LOOP;
END
$$;

-- Nobody but the owner creates in the schema (PostgreSQL 15 and later revoke it already;
-- 14 grants it to PUBLIC). A migrating role that does not own the schema leaves it as it is.
DO $$
BEGIN
    REVOKE CREATE ON SCHEMA public FROM PUBLIC;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'CREATE on schema public left as it is: % does not own it', current_user;
END
$$;

-- The worker kept run_events' monthly partitions as the owner: creating and dropping a
-- partition is DDL on the partitioned table, which only its owner may do. The two functions
-- now run as their owner, for the worker alone. `public` first: their CREATE TABLE names no
-- schema and must land there (pg_catalog first would be the system catalog); nobody but the
-- owner creates in `public` (above), so nothing there can stand in for a catalog function.
ALTER FUNCTION create_run_events_partitions(timestamptz, timestamptz)
    SECURITY DEFINER SET search_path = public, pg_catalog;
ALTER FUNCTION drop_empty_run_events_partitions(timestamptz)
    SECURITY DEFINER SET search_path = public, pg_catalog;
REVOKE ALL ON FUNCTION create_run_events_partitions(timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION drop_empty_run_events_partitions(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION create_run_events_partitions(timestamptz, timestamptz)
    TO waystation_worker;
GRANT EXECUTE ON FUNCTION drop_empty_run_events_partitions(timestamptz) TO waystation_worker;
