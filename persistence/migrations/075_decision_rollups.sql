-- Decision analytics (issue 42) over a year of requests, fast: a roll-up per day, run kind,
-- gate and scope (a group's runs, or a person's own), kept by a trigger as each request
-- closes, with a histogram of the time to decide (bucket 1: under a second; bucket i: from
-- 2^((i-2)/2) to 2^((i-1)/2) seconds; 49: longer), so percentiles are read from
-- a few thousand rows instead of sorting a million. A gate is its checkpoint without a
-- trailing number (`approve_book_vendor_3` is the gate `approve_book_vendor`), so a kind that
-- numbers its requests does not multiply the rows.

CREATE FUNCTION decision_gate(checkpoint_name text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT regexp_replace(checkpoint_name, '_[0-9]+$', '') $$;

CREATE FUNCTION decision_bucket(seconds double precision) RETURNS int
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN seconds < 1 THEN 1
                      ELSE least(49, 2 + floor(log(2, seconds::numeric) * 2)::int) END $$;

CREATE TABLE decision_rollups (
    day             date NOT NULL,
    kind            text NOT NULL,
    gate            text NOT NULL,
    -- The scope: a group's runs (group_id) or a person's own (owner, group_id NULL).
    scope           text NOT NULL,
    group_id        uuid,
    owner           text,
    project_id      text NOT NULL DEFAULT '',
    approved        int NOT NULL DEFAULT 0,
    rejected        int NOT NULL DEFAULT 0,
    expired         int NOT NULL DEFAULT 0,
    superseded      int NOT NULL DEFAULT 0,
    -- Decided by a policy (decision_by 'policy:<name>@<version>').
    policy_decided  int NOT NULL DEFAULT 0,
    -- Decided requests that recommended an option, and those decided otherwise.
    recommended     int NOT NULL DEFAULT 0,
    overruled       int NOT NULL DEFAULT 0,
    -- Reminders sent before the decision.
    reminders       int NOT NULL DEFAULT 0,
    seconds         double precision NOT NULL DEFAULT 0,
    -- Decided requests by time to decide (decision_bucket: 1-based, 49 buckets).
    hist            int[] NOT NULL DEFAULT array_fill(0, ARRAY[49]),
    PRIMARY KEY (day, kind, gate, scope, project_id)
);
CREATE INDEX idx_decision_rollups_group ON decision_rollups (group_id, day)
    WHERE group_id IS NOT NULL;
CREATE INDEX idx_decision_rollups_owner ON decision_rollups (owner, day) WHERE group_id IS NULL;

-- Counts one closed request in its day's roll-up (the trigger below; the backfill).
CREATE FUNCTION decision_rollup_count(h hitl_requests) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public'
    AS $$
DECLARE
    r record;
    decided boolean := h.status IN ('approved', 'rejected');
    took double precision := CASE WHEN h.status IN ('approved', 'rejected')
                                       AND h.decision_at IS NOT NULL
                                  THEN greatest(0, extract(epoch FROM h.decision_at
                                                                      - h.created_at))
                                  ELSE NULL END;
    b int;
BEGIN
    SELECT kind, owner, group_id, project_id INTO r FROM public.runs WHERE id = h.run_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    b := CASE WHEN took IS NULL THEN NULL ELSE public.decision_bucket(took) END;
    INSERT INTO public.decision_rollups AS d
           (day, kind, gate, scope, group_id, owner, project_id, approved, rejected, expired,
            superseded, policy_decided, recommended, overruled, reminders, seconds, hist)
    VALUES ((coalesce(h.decision_at, h.updated_at, now()) AT TIME ZONE 'UTC')::date, r.kind,
            public.decision_gate(h.checkpoint_name),
            coalesce(r.group_id::text, 'owner:' || r.owner), r.group_id,
            CASE WHEN r.group_id IS NULL THEN r.owner END, coalesce(r.project_id, ''),
            (h.status = 'approved')::int, (h.status = 'rejected')::int,
            (h.status = 'expired')::int, (h.status = 'superseded')::int,
            (decided AND h.decision_by LIKE 'policy:%')::int,
            (decided AND h.recommended_option IS NOT NULL)::int,
            (decided AND h.recommended_option IS NOT NULL
                     AND h.decision IS DISTINCT FROM h.recommended_option)::int,
            CASE WHEN decided THEN h.reminders_sent ELSE 0 END, coalesce(took, 0),
            CASE WHEN b IS NULL THEN array_fill(0, ARRAY[49])
                 ELSE array_fill(0, ARRAY[b - 1]) || 1 || array_fill(0, ARRAY[49 - b]) END)
    ON CONFLICT (day, kind, gate, scope, project_id) DO UPDATE
       SET approved = d.approved + EXCLUDED.approved,
           rejected = d.rejected + EXCLUDED.rejected,
           expired = d.expired + EXCLUDED.expired,
           superseded = d.superseded + EXCLUDED.superseded,
           policy_decided = d.policy_decided + EXCLUDED.policy_decided,
           recommended = d.recommended + EXCLUDED.recommended,
           overruled = d.overruled + EXCLUDED.overruled,
           reminders = d.reminders + EXCLUDED.reminders,
           seconds = d.seconds + EXCLUDED.seconds,
           hist = CASE WHEN b IS NULL THEN d.hist
                       ELSE d.hist[1:b - 1] || (d.hist[b] + 1) || d.hist[b + 1:49] END;
END
$$;

CREATE FUNCTION decision_rollup_add() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public'
    AS $$
BEGIN
    PERFORM public.decision_rollup_count(NEW);
    RETURN NULL;
END
$$;

-- A request closes once (close_gate and supersede_pending_gates touch pending rows only).
CREATE TRIGGER hitl_requests_rollup AFTER UPDATE OF status ON hitl_requests
    FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending')
    EXECUTE FUNCTION decision_rollup_add();

-- The requests closed before this migration.
SELECT decision_rollup_count(h) FROM hitl_requests h WHERE h.status <> 'pending';

-- Analytics' raw reads (a person's decisions; overdue requests now).
CREATE INDEX idx_hitl_requests_decided_by ON hitl_requests (decision_by, decision_at)
    WHERE decision_by IS NOT NULL;
CREATE INDEX idx_hitl_requests_pending_expiry ON hitl_requests (expires_at)
    WHERE status = 'pending';

GRANT SELECT, INSERT, UPDATE, DELETE ON decision_rollups TO waystation_api, waystation_worker;
ALTER TABLE decision_rollups ENABLE ROW LEVEL SECURITY;
ALTER TABLE decision_rollups FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON decision_rollups TO waystation_worker USING (true) WITH CHECK (true);
CREATE POLICY api_visible ON decision_rollups TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR (group_id IS NULL AND owner = waystation_user())
           OR group_id IN (SELECT waystation_user_groups()));
