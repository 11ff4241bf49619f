-- Row-level security as a second wall behind the API's checks (issue 13, seed 000's policies).
--
-- The API borrows each connection as role `waystation_api` with the caller's claims set on it
-- (`waystation.user`, `waystation.role`: see persistence/claims.py); a row is visible when the
-- claims allow it: the run's owner, a member of the run's group, the `service` role. No claims,
-- no rows. Workers connect as the login role, a member of `waystation_worker`, which the
-- policies let read and write everything. RLS is forced, so a table owner is held to the
-- policies too; only superusers and BYPASSRLS roles pass (the embedded server's `postgres`).
-- Edited when the kinds came to own their tables (issue 40): a kind's tables get their grants
-- and policies in its own migrations.

-- Roles are cluster-wide: several databases (tests, a second installation) share them, two
-- migrations may race to create them, and a login without CREATEROLE finds them made by an
-- administrator (it may not even try CREATE ROLE).
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['waystation_api', 'waystation_worker'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN NOBYPASSRLS', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
            END;
        END IF;
    END LOOP;
END
$$;

GRANT USAGE ON SCHEMA public TO waystation_api, waystation_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public
   TO waystation_api, waystation_worker;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO waystation_api, waystation_worker;
REVOKE ALL ON schema_migrations FROM waystation_api, waystation_worker;
-- Partitions (of run_events, migration 021) are reached through their parent only, whose
-- policies apply; read directly they would have none.
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relispartition LOOP
        EXECUTE format('REVOKE ALL ON %I FROM waystation_api, waystation_worker', t);
    END LOOP;
END
$$;
-- No default privileges: a table of a later migration is refused to the API until that
-- migration grants it along with its policies (a loud error rather than a silent leak), and
-- partitions created at run time are reached through their parent's grants and policies only.

-- The claims. An unset custom setting reads as NULL in a fresh session but as '' once it was
-- set and reset in the same session (a pooled connection): both mean "nobody".
CREATE FUNCTION waystation_user() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT NULLIF(current_setting('waystation.user', true), '') $$;

CREATE FUNCTION waystation_claims_role() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT COALESCE(current_setting('waystation.role', true), '') $$;

-- The caller's groups. SECURITY DEFINER because group_members' own policy asks the same
-- question (a policy reading its own table would recurse); its owner, the migration runner,
-- is a superuser or a member of waystation_worker, so it reads every membership.
CREATE FUNCTION waystation_user_groups() RETURNS SETOF uuid LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, public
AS $$ SELECT group_id FROM public.group_members
       WHERE user_name = NULLIF(current_setting('waystation.user', true), '') $$;
REVOKE ALL ON FUNCTION waystation_user_groups() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION waystation_user_groups() TO waystation_api;

-- The runs the caller sees, for the policies of a run's rows: read through the owner and group
-- indexes, once per statement. Written as "EXISTS (a visible run with this id)" instead, the
-- planner hashes the ids of every run it may see, scanning the whole table to apply runs'
-- policy (53 ms per events page among 100,000 runs). SECURITY DEFINER for the same reason as
-- above; it applies the claims itself.
CREATE FUNCTION waystation_visible_runs() RETURNS SETOF uuid LANGUAGE sql STABLE ROWS 100
SECURITY DEFINER SET search_path = pg_catalog, public
AS $$ SELECT id FROM public.runs
       WHERE owner = NULLIF(current_setting('waystation.user', true), '')
      UNION ALL
      SELECT r.id FROM public.runs r JOIN public.group_members m ON m.group_id = r.group_id
       WHERE m.user_name = NULLIF(current_setting('waystation.user', true), '') $$;
REVOKE ALL ON FUNCTION waystation_visible_runs() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION waystation_visible_runs() TO waystation_api;

-- Every table a user can read: RLS on and forced; the worker sees and writes all of it.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['runs', 'run_events', 'run_snapshots', 'hitl_requests',
                             'run_artifacts',
                             'console_login_codes', 'console_sessions', 'groups',
                             'group_members', 'webhooks', 'webhook_deliveries',
                             'webhook_attempts', 'user_contacts', 'decision_links', 'api_keys']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY worker_all ON %I TO waystation_worker '
                       'USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;

-- The API's policies. One per table, FOR ALL: what a caller sees is what it may write (the
-- API's own checks decide the finer rules: who decides, who manages members).
CREATE POLICY api_visible ON runs TO waystation_api
    USING (waystation_claims_role() = 'service' OR owner = waystation_user()
           OR group_id IN (SELECT waystation_user_groups()));

-- A run's rows are visible with the run. The service role's test comes first and stands
-- alone: OR stops there, so reads over every run (the event hub, /metrics) run no subquery.
CREATE POLICY api_visible ON run_events TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR run_events.run_id IN (SELECT waystation_visible_runs()));
CREATE POLICY api_visible ON run_snapshots TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR run_snapshots.run_id IN (SELECT waystation_visible_runs()));
CREATE POLICY api_visible ON hitl_requests TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR hitl_requests.run_id IN (SELECT waystation_visible_runs()));
CREATE POLICY api_visible ON run_artifacts TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR run_artifacts.run_id IN (SELECT waystation_visible_runs()));

CREATE POLICY api_visible ON groups TO waystation_api
    USING (waystation_claims_role() = 'service' OR created_by = waystation_user()
           OR id IN (SELECT waystation_user_groups()));
CREATE POLICY api_visible ON group_members TO waystation_api
    USING (waystation_claims_role() = 'service' OR user_name = waystation_user()
           OR group_id IN (SELECT waystation_user_groups()));

CREATE POLICY api_visible ON webhooks TO waystation_api
    USING (waystation_claims_role() = 'service' OR owner = waystation_user());
CREATE POLICY api_visible ON webhook_deliveries TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM webhooks w WHERE w.id = webhook_deliveries.webhook_id));
CREATE POLICY api_visible ON webhook_attempts TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM webhook_deliveries d
                    WHERE d.id = webhook_attempts.delivery_id));

CREATE POLICY api_visible ON user_contacts TO waystation_api
    USING (waystation_claims_role() = 'service' OR user_name = waystation_user());

-- Credentials are looked up before anyone is known, by the secret they hold: the
-- `authenticator` claims (sign-in, sessions, API keys, emailed links) see them, nothing else.
CREATE POLICY api_visible ON console_login_codes TO waystation_api
    USING (waystation_claims_role() IN ('service', 'authenticator')
           OR user_name = waystation_user());
CREATE POLICY api_visible ON console_sessions TO waystation_api
    USING (waystation_claims_role() IN ('service', 'authenticator')
           OR user_name = waystation_user());
CREATE POLICY api_visible ON api_keys TO waystation_api
    USING (waystation_claims_role() IN ('service', 'authenticator')
           OR owner = waystation_user());
CREATE POLICY api_visible ON decision_links TO waystation_api
    USING (waystation_claims_role() IN ('service', 'authenticator')
           OR user_name = waystation_user());
