-- Credentials do not outlive the person (issue 25).
--
-- A signed token (HS256 or an identity provider's) cannot be revoked one by one: instead a
-- user's row says which tokens no longer count, those issued before `not_before` (an erasure
-- writes it). The row is keyed by the SHA-256 of the user's name, not the name: it must outlive
-- the erasure sweep (a token may stay unexpired for weeks), after which no table names the
-- person. Credentials are looked up before anyone is known: the `authenticator` claims read it.
CREATE TABLE token_cutoffs (
    subject_hash  text PRIMARY KEY,
    not_before    timestamptz NOT NULL
);

GRANT SELECT, INSERT, UPDATE, DELETE ON token_cutoffs TO waystation_api, waystation_worker;
ALTER TABLE token_cutoffs ENABLE ROW LEVEL SECURITY;
ALTER TABLE token_cutoffs FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON token_cutoffs TO waystation_worker USING (true) WITH CHECK (true);
CREATE POLICY api_visible ON token_cutoffs TO waystation_api
    USING (waystation_claims_role() IN ('service', 'authenticator'));

-- A group key acts for the group as long as its maker is in it: when the maker leaves (removed,
-- leaving, erased), their keys for that group are revoked and leave it, in the same
-- transaction. SECURITY DEFINER because the one removing them (another owner) does not see
-- the maker's keys (api_keys' policy); its owner, the migration runner, sees every row.
CREATE FUNCTION revoke_keys_of_departed_maker() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    UPDATE public.api_keys SET revoked_at = now()
     WHERE group_id = OLD.group_id AND owner = OLD.user_name AND revoked_at IS NULL;
    -- Revoked earlier (an erasure revokes every key before it ends memberships) or now: either
    -- way the key is no member any more.
    DELETE FROM public.group_members
     WHERE group_id = OLD.group_id
       AND user_name IN (SELECT 'apikey:' || k.id FROM public.api_keys k
                          WHERE k.group_id = OLD.group_id AND k.owner = OLD.user_name);
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION revoke_keys_of_departed_maker() FROM PUBLIC;
CREATE TRIGGER group_keys_leave_with_their_maker AFTER DELETE ON group_members
    FOR EACH ROW EXECUTE FUNCTION revoke_keys_of_departed_maker();

-- Keys are made by people only from now on (a key cannot make keys); keys made by keys
-- (owner `apikey:<id>`) are revoked, as nobody can tell whom they are for.
UPDATE api_keys SET revoked_at = now() WHERE owner LIKE 'apikey:%' AND revoked_at IS NULL;

-- Departed makers of existing group keys: their keys end now too.
WITH departed AS (
    UPDATE api_keys k SET revoked_at = now()
     WHERE k.group_id IS NOT NULL AND k.revoked_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM group_members m
                        WHERE m.group_id = k.group_id AND m.user_name = k.owner)
    RETURNING k.id, k.group_id
)
DELETE FROM group_members m USING departed d
 WHERE m.group_id = d.group_id AND m.user_name = 'apikey:' || d.id;
