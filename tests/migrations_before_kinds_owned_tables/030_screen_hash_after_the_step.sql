-- record_mobile_step (migration 028), and whether the step's screen has no perceptual hash
-- stored (issue 16). The worker computes a step's hash while this statement runs rather than
-- before sending it (persistence/graph.py record_step_in_one_call), then stores it only where
-- it is missing: on a new screen, or on a later visit to a screen whose hash a crash between
-- the two statements left out. A wrapper, so the step's write stays the one function 028
-- defines; its look-up is a statement of its own, which sees the screen row just written.
CREATE FUNCTION record_mobile_step_needing_hash(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_outcome jsonb := record_mobile_step(p);
BEGIN
    IF v_outcome IS NULL OR v_outcome->'screen_id' = 'null'::jsonb THEN
        RETURN v_outcome;  -- recorded before, or a step outside the app: no screen to hash
    END IF;
    RETURN v_outcome || jsonb_build_object('phash_missing', (
        SELECT s.phash IS NULL FROM screens s WHERE s.id = (v_outcome->>'screen_id')::bigint));
END
$$;

REVOKE ALL ON FUNCTION record_mobile_step_needing_hash(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_mobile_step_needing_hash(jsonb) TO waystation_worker;
