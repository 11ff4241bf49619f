-- Issue 38: per-user limits every API replica shares. Writes per minute are a token bucket
-- per caller, and each open stream is a lease that its replica refreshes while the stream
-- lasts: a stream closed on one replica frees its slot everywhere, and the leases of a replica
-- that died (kill -9) lapse after their time to live instead of holding slots forever.
--
-- A caller is the SHA-256 of a user's name, or of an API key, provider token or session until
-- the request is authenticated (see api/rate_limits.py): no row names a person. The API reaches these tables only through
-- the functions below (SECURITY DEFINER, owned by the migration runner, which reads every
-- row: see migration 022), so one user's connection cannot read who else is counted.
--
-- UNLOGGED: a count is written on every write and stream, and waiting for the WAL to reach the
-- disk cost 2.3 ms a write where it costs 0.14 unlogged (docs/operations.md, "Limits"). A
-- crash of the database empties them: every bucket is then full and every stream uncounted
-- until it is opened again, which is what a restart of a replica did before.
CREATE UNLOGGED TABLE user_write_buckets (
    caller  text PRIMARY KEY,
    tokens  double precision NOT NULL,
    at      timestamptz NOT NULL
);

CREATE UNLOGGED TABLE stream_leases (
    id          uuid PRIMARY KEY,
    caller      text NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX stream_leases_caller ON stream_leases (caller, expires_at);

ALTER TABLE user_write_buckets ENABLE ROW LEVEL SECURITY;
ALTER TABLE user_write_buckets FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON user_write_buckets TO waystation_worker USING (true) WITH CHECK (true);
ALTER TABLE stream_leases ENABLE ROW LEVEL SECURITY;
ALTER TABLE stream_leases FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON stream_leases TO waystation_worker USING (true) WITH CHECK (true);
REVOKE ALL ON user_write_buckets, stream_leases FROM waystation_api;

-- One write of `who`: 0 when it may go ahead (a token is taken), else the seconds until it
-- may. The bucket holds at most `per_minute` tokens and refills continuously; the row lock of
-- the upsert serializes one caller's writes across replicas, and the database's clock is the
-- one clock they share.
CREATE FUNCTION take_write(who text, per_minute integer) RETURNS double precision
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
DECLARE
    now_ timestamptz := clock_timestamp();
    have double precision;
BEGIN
    INSERT INTO public.user_write_buckets AS b (caller, tokens, at)
    VALUES (who, per_minute, now_)
    ON CONFLICT (caller) DO UPDATE
       SET tokens = least(per_minute::double precision,
                          b.tokens + extract(epoch FROM now_ - b.at) * per_minute / 60.0),
           at = now_
    RETURNING tokens INTO have;
    IF have >= 1 THEN
        UPDATE public.user_write_buckets SET tokens = have - 1 WHERE caller = who;
        RETURN 0;
    END IF;
    RETURN (1 - have) * 60.0 / per_minute;
END
$$;

-- Holds stream lease `lease` for `who` for `ttl_seconds` when `who` holds fewer than `most`
-- other live leases: true when held. A lease held for another caller moves to `who` (a key's
-- stream, once the key is known to be its user's). The advisory lock serializes one caller's
-- count and insert across replicas.
CREATE FUNCTION hold_stream(lease uuid, who text, most integer, ttl_seconds double precision)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('stream_leases:' || who, 0));
    IF (SELECT count(*) FROM public.stream_leases
         WHERE caller = who AND id <> lease AND expires_at > clock_timestamp()) >= most THEN
        RETURN false;
    END IF;
    INSERT INTO public.stream_leases (id, caller, expires_at)
    VALUES (lease, who, clock_timestamp() + make_interval(secs => ttl_seconds))
    ON CONFLICT (id) DO UPDATE SET caller = EXCLUDED.caller, expires_at = EXCLUDED.expires_at;
    RETURN true;
END
$$;

CREATE FUNCTION release_stream(lease uuid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$ DELETE FROM public.stream_leases WHERE id = lease $$;

-- A replica's periodic call: its open streams' leases live `ttl_seconds` more; lapsed leases
-- (a dead replica's) and buckets idle long enough to be full again are forgotten.
CREATE FUNCTION renew_streams(leases uuid[], ttl_seconds double precision) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    UPDATE public.stream_leases
       SET expires_at = clock_timestamp() + make_interval(secs => ttl_seconds)
     WHERE id = ANY(leases);
    DELETE FROM public.stream_leases WHERE expires_at < clock_timestamp();
    DELETE FROM public.user_write_buckets WHERE at < clock_timestamp() - interval '1 minute';
END
$$;

REVOKE ALL ON FUNCTION take_write(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION hold_stream(uuid, text, integer, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION release_stream(uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION renew_streams(uuid[], double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION take_write(text, integer) TO waystation_api;
GRANT EXECUTE ON FUNCTION hold_stream(uuid, text, integer, double precision) TO waystation_api;
GRANT EXECUTE ON FUNCTION release_stream(uuid) TO waystation_api;
GRANT EXECUTE ON FUNCTION renew_streams(uuid[], double precision) TO waystation_api;
