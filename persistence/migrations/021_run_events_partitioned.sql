-- `run_events` partitioned by month of `created_at` (issue 15), moved over with every row,
-- its id and its seq unchanged.
--
-- Why by month: the table grows with every run and is the one retention empties the most; a
-- month per partition keeps each one's indexes small and lets old months be detached or
-- dropped whole later.
--
-- Idempotency without UNIQUE (run_id, event_key) / (run_id, seq): a partitioned table's
-- unique constraints must include the partition key, and a retried event may be written in
-- another month than its first copy, so such a constraint would not catch it. Every append
-- goes through append_run_events, which locks the run's row (FOR UPDATE) and looks the key up
-- before it inserts: appends to one run are serialised, so the look-up under that lock is
-- exact, and seq comes from runs.last_seq under the same lock. The per-partition indexes on
-- (run_id, event_key) and (run_id, seq) keep both the look-up and every read by seq fast.

ALTER TABLE run_events RENAME TO run_events_unpartitioned;
-- Their names are wanted by the new table; the old table goes at the end of this migration.
ALTER TABLE run_events_unpartitioned
    DROP CONSTRAINT run_events_pkey,
    DROP CONSTRAINT run_events_run_id_seq_key,
    DROP CONSTRAINT run_events_run_id_event_key_key,
    DROP CONSTRAINT run_events_run_id_fkey;
DROP TRIGGER run_events_add_usage ON run_events_unpartitioned;

CREATE TABLE run_events (
    id             bigint NOT NULL DEFAULT nextval('run_events_id_seq'),
    run_id         uuid NOT NULL,
    seq            bigint NOT NULL,
    event_key      text NOT NULL,
    type           text NOT NULL,
    phase          int,
    crew           text,
    task           text,
    agent          text,
    status         text,
    progress_pct   int CHECK (progress_pct BETWEEN 0 AND 100),
    output         jsonb,
    error_message  text,
    duration_ms    int,
    created_at     timestamptz NOT NULL DEFAULT now()
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE run_events_id_seq OWNED BY run_events.id;

-- Rows outside every monthly partition (a clock far off, months nobody created) land here;
-- creating their month later moves them out.
CREATE TABLE run_events_default PARTITION OF run_events DEFAULT;

-- Creates the monthly partitions (UTC months) from p_from's month through p_through's, those
-- missing only; returns how many it created. Safe to call at any time and from several
-- processes at once (the worker calls it at start and before each retention batch).
--
-- A month is created as a plain table and then attached: ATTACH takes only a SHARE UPDATE
-- EXCLUSIVE lock on run_events, so live appends go on meanwhile (CREATE TABLE ... PARTITION OF
-- would lock them out). Rows of that month already in the default partition are moved into it
-- first, else attaching would fail; being moved before the attach, they do not fire the usage
-- trigger a second time.
CREATE FUNCTION create_run_events_partitions(p_from timestamptz, p_through timestamptz)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_month   timestamp := date_trunc('month', p_from AT TIME ZONE 'UTC');
    v_last    timestamp := date_trunc('month', p_through AT TIME ZONE 'UTC');
    v_lo      timestamptz;
    v_hi      timestamptz;
    v_name    text;
    v_created int := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('create_run_events_partitions'));
    WHILE v_month <= v_last LOOP
        v_name := 'run_events_' || to_char(v_month, 'YYYY_MM');
        IF to_regclass(v_name) IS NULL THEN
            v_lo := v_month AT TIME ZONE 'UTC';
            v_hi := (v_month + interval '1 month') AT TIME ZONE 'UTC';
            EXECUTE format('CREATE TABLE %I (LIKE run_events INCLUDING DEFAULTS '
                           'INCLUDING CONSTRAINTS)', v_name);
            EXECUTE format('WITH moved AS (DELETE FROM run_events_default '
                           'WHERE created_at >= $1 AND created_at < $2 RETURNING *) '
                           'INSERT INTO %I SELECT * FROM moved', v_name)
                USING v_lo, v_hi;
            EXECUTE format('ALTER TABLE run_events ATTACH PARTITION %I '
                           'FOR VALUES FROM (%L) TO (%L)', v_name, v_lo, v_hi);
            v_created := v_created + 1;
        END IF;
        v_month := v_month + interval '1 month';
    END LOOP;
    RETURN v_created;
END
$$;

-- Drops the monthly partitions wholly before p_before that hold no row (retention emptied
-- them); returns how many it dropped. Every read of a run probes each partition's index, so
-- months that retention has emptied should not stay around to be probed.
--
-- Dropping needs run_events locked exclusively: a short lock_timeout makes a busy table skip
-- the clean-up until the next call rather than hold every append queued behind the lock.
-- Emptiness is checked again under that lock, so a row written meanwhile is never dropped.
CREATE FUNCTION drop_empty_run_events_partitions(p_before timestamptz)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_empty   regclass[] := '{}';
    v_part    regclass;
    v_is      boolean;
    v_dropped int := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('create_run_events_partitions'));
    -- Looked at without the lock first: most calls find nothing to drop and lock nothing.
    FOR v_part IN
        SELECT c.oid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'run_events'::regclass
           AND c.relname ~ '^run_events_\d{4}_\d{2}$'
           AND (to_timestamp(substr(c.relname, 12), 'YYYY_MM')::timestamp + interval '1 month')
               AT TIME ZONE 'UTC' <= p_before
    LOOP
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s)', v_part) INTO v_is;
        IF v_is THEN
            v_empty := v_empty || v_part;
        END IF;
    END LOOP;
    IF cardinality(v_empty) = 0 THEN
        RETURN 0;
    END IF;
    BEGIN
        PERFORM set_config('lock_timeout', '200ms', true);
        LOCK TABLE run_events IN ACCESS EXCLUSIVE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0;
    END;
    FOREACH v_part IN ARRAY v_empty LOOP
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s)', v_part) INTO v_is;
        IF v_is THEN
            EXECUTE format('DROP TABLE %s', v_part);
            v_dropped := v_dropped + 1;
        END IF;
    END LOOP;
    RETURN v_dropped;
END
$$;

-- Every month the existing events span, and three ahead, exist before the copy, so it fills
-- them directly and the default partition stays empty.
SELECT create_run_events_partitions(
    coalesce((SELECT min(created_at) FROM run_events_unpartitioned), now()),
    now() + interval '3 months');

-- Indexes, the foreign key and the usage trigger come after the copy: building an index once
-- is faster than maintaining it row by row, and the trigger must not count the copied events'
-- costs into their runs a second time.
INSERT INTO run_events SELECT id, run_id, seq, event_key, type, phase, crew, task, agent, status,
                              progress_pct, output, error_message, duration_ms, created_at
  FROM run_events_unpartitioned;
DROP TABLE run_events_unpartitioned;

ALTER TABLE run_events ADD CONSTRAINT run_events_pkey PRIMARY KEY (id, created_at);
CREATE INDEX idx_run_events_run_seq ON run_events (run_id, seq);
CREATE INDEX idx_run_events_run_key ON run_events (run_id, event_key);
ALTER TABLE run_events ADD CONSTRAINT run_events_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE;
CREATE TRIGGER run_events_add_usage AFTER INSERT ON run_events
    FOR EACH ROW WHEN (jsonb_typeof(NEW.output->'usage') = 'object')
    EXECUTE FUNCTION add_event_usage_to_run();
ANALYZE run_events;
