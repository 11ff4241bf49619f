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
    -- Decided requests by time to decide: h<i> counts bucket i of decision_bucket. Columns,
    -- not an array, so that a year of them sums as 49 plain sums.
    h1 int NOT NULL DEFAULT 0,
    h2 int NOT NULL DEFAULT 0,
    h3 int NOT NULL DEFAULT 0,
    h4 int NOT NULL DEFAULT 0,
    h5 int NOT NULL DEFAULT 0,
    h6 int NOT NULL DEFAULT 0,
    h7 int NOT NULL DEFAULT 0,
    h8 int NOT NULL DEFAULT 0,
    h9 int NOT NULL DEFAULT 0,
    h10 int NOT NULL DEFAULT 0,
    h11 int NOT NULL DEFAULT 0,
    h12 int NOT NULL DEFAULT 0,
    h13 int NOT NULL DEFAULT 0,
    h14 int NOT NULL DEFAULT 0,
    h15 int NOT NULL DEFAULT 0,
    h16 int NOT NULL DEFAULT 0,
    h17 int NOT NULL DEFAULT 0,
    h18 int NOT NULL DEFAULT 0,
    h19 int NOT NULL DEFAULT 0,
    h20 int NOT NULL DEFAULT 0,
    h21 int NOT NULL DEFAULT 0,
    h22 int NOT NULL DEFAULT 0,
    h23 int NOT NULL DEFAULT 0,
    h24 int NOT NULL DEFAULT 0,
    h25 int NOT NULL DEFAULT 0,
    h26 int NOT NULL DEFAULT 0,
    h27 int NOT NULL DEFAULT 0,
    h28 int NOT NULL DEFAULT 0,
    h29 int NOT NULL DEFAULT 0,
    h30 int NOT NULL DEFAULT 0,
    h31 int NOT NULL DEFAULT 0,
    h32 int NOT NULL DEFAULT 0,
    h33 int NOT NULL DEFAULT 0,
    h34 int NOT NULL DEFAULT 0,
    h35 int NOT NULL DEFAULT 0,
    h36 int NOT NULL DEFAULT 0,
    h37 int NOT NULL DEFAULT 0,
    h38 int NOT NULL DEFAULT 0,
    h39 int NOT NULL DEFAULT 0,
    h40 int NOT NULL DEFAULT 0,
    h41 int NOT NULL DEFAULT 0,
    h42 int NOT NULL DEFAULT 0,
    h43 int NOT NULL DEFAULT 0,
    h44 int NOT NULL DEFAULT 0,
    h45 int NOT NULL DEFAULT 0,
    h46 int NOT NULL DEFAULT 0,
    h47 int NOT NULL DEFAULT 0,
    h48 int NOT NULL DEFAULT 0,
    h49 int NOT NULL DEFAULT 0,
    PRIMARY KEY (day, kind, gate, scope, project_id)
)
-- Every closed request updates its row, leaving a dead version behind: vacuumed after 2% of
-- the rows changed (not the default 20%), so that a read of a year stays a read of its rows.
WITH (autovacuum_vacuum_scale_factor = 0.02);
-- A reader's rows: its own scope and its groups', each a range of days.
CREATE INDEX idx_decision_rollups_scope ON decision_rollups (scope, day);

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
    -- No bucket (0) for a request that was not decided.
    b := CASE WHEN took IS NULL THEN 0 ELSE public.decision_bucket(took) END;
    INSERT INTO public.decision_rollups AS d
           (day, kind, gate, scope, group_id, owner, project_id, approved, rejected, expired,
            superseded, policy_decided, recommended, overruled, reminders, seconds,
            h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11, h12, h13, h14, h15, h16, h17, h18,
            h19, h20, h21, h22, h23, h24, h25, h26, h27, h28, h29, h30, h31, h32, h33, h34, h35,
            h36, h37, h38, h39, h40, h41, h42, h43, h44, h45, h46, h47, h48, h49)
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
            (b = 1)::int, (b = 2)::int, (b = 3)::int, (b = 4)::int, (b = 5)::int, (b = 6)::int,
            (b = 7)::int, (b = 8)::int, (b = 9)::int, (b = 10)::int, (b = 11)::int,
            (b = 12)::int, (b = 13)::int, (b = 14)::int, (b = 15)::int, (b = 16)::int,
            (b = 17)::int, (b = 18)::int, (b = 19)::int, (b = 20)::int, (b = 21)::int,
            (b = 22)::int, (b = 23)::int, (b = 24)::int, (b = 25)::int, (b = 26)::int,
            (b = 27)::int, (b = 28)::int, (b = 29)::int, (b = 30)::int, (b = 31)::int,
            (b = 32)::int, (b = 33)::int, (b = 34)::int, (b = 35)::int, (b = 36)::int,
            (b = 37)::int, (b = 38)::int, (b = 39)::int, (b = 40)::int, (b = 41)::int,
            (b = 42)::int, (b = 43)::int, (b = 44)::int, (b = 45)::int, (b = 46)::int,
            (b = 47)::int, (b = 48)::int, (b = 49)::int)
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
           h1 = d.h1 + EXCLUDED.h1, h2 = d.h2 + EXCLUDED.h2, h3 = d.h3 + EXCLUDED.h3,
           h4 = d.h4 + EXCLUDED.h4, h5 = d.h5 + EXCLUDED.h5, h6 = d.h6 + EXCLUDED.h6,
           h7 = d.h7 + EXCLUDED.h7, h8 = d.h8 + EXCLUDED.h8, h9 = d.h9 + EXCLUDED.h9,
           h10 = d.h10 + EXCLUDED.h10, h11 = d.h11 + EXCLUDED.h11, h12 = d.h12 + EXCLUDED.h12,
           h13 = d.h13 + EXCLUDED.h13, h14 = d.h14 + EXCLUDED.h14, h15 = d.h15 + EXCLUDED.h15,
           h16 = d.h16 + EXCLUDED.h16, h17 = d.h17 + EXCLUDED.h17, h18 = d.h18 + EXCLUDED.h18,
           h19 = d.h19 + EXCLUDED.h19, h20 = d.h20 + EXCLUDED.h20, h21 = d.h21 + EXCLUDED.h21,
           h22 = d.h22 + EXCLUDED.h22, h23 = d.h23 + EXCLUDED.h23, h24 = d.h24 + EXCLUDED.h24,
           h25 = d.h25 + EXCLUDED.h25, h26 = d.h26 + EXCLUDED.h26, h27 = d.h27 + EXCLUDED.h27,
           h28 = d.h28 + EXCLUDED.h28, h29 = d.h29 + EXCLUDED.h29, h30 = d.h30 + EXCLUDED.h30,
           h31 = d.h31 + EXCLUDED.h31, h32 = d.h32 + EXCLUDED.h32, h33 = d.h33 + EXCLUDED.h33,
           h34 = d.h34 + EXCLUDED.h34, h35 = d.h35 + EXCLUDED.h35, h36 = d.h36 + EXCLUDED.h36,
           h37 = d.h37 + EXCLUDED.h37, h38 = d.h38 + EXCLUDED.h38, h39 = d.h39 + EXCLUDED.h39,
           h40 = d.h40 + EXCLUDED.h40, h41 = d.h41 + EXCLUDED.h41, h42 = d.h42 + EXCLUDED.h42,
           h43 = d.h43 + EXCLUDED.h43, h44 = d.h44 + EXCLUDED.h44, h45 = d.h45 + EXCLUDED.h45,
           h46 = d.h46 + EXCLUDED.h46, h47 = d.h47 + EXCLUDED.h47, h48 = d.h48 + EXCLUDED.h48,
           h49 = d.h49 + EXCLUDED.h49;
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
