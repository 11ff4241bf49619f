-- name: insert_job
-- Creates a run's job once (a retried prepare finds it); its status starts as the run's. Its
-- description and metadata come from the run's input, as its items do: they stay out of the
-- workflow's history.
INSERT INTO jobs (id, run_id, name, status, spec, max_workers, description, metadata)
SELECT r.id, r.id, $2, r.status, $3, $4, r.input->>'description',
       CASE WHEN jsonb_typeof(r.input->'metadata') = 'object' THEN r.input->'metadata'
            ELSE '{}'::jsonb END
  FROM runs r WHERE r.id = $1
ON CONFLICT (id) DO NOTHING;

-- name: run_items
-- The items a user gave inline with a batch run (kept in the run's input).
SELECT input->'items' AS items FROM runs WHERE id = $1;

-- name: insert_work_units
-- Inserts a chunk of items from ordinal $2 on; items already stored keep their first copy.
INSERT INTO work_units (job_id, ordinal, payload)
SELECT $1, $2 + t.ord::int - 1, t.value
  FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS t(value, ord)
ON CONFLICT (job_id, ordinal) DO NOTHING;

-- name: keep_earlier_outputs
-- A re-run's kept outputs (the run's input.kept_outputs, one list per item; $2 the pipeline's
-- step names) are stored as its items' steps, as if just run: an item follows them and runs
-- only the rest. They cost the new job nothing (the source job paid). A retried prepare finds
-- them stored and the paths set.
WITH kept AS (
    SELECT w.id AS unit_id, k.step, array_position($2::text[], k.step) - 1 AS step_index,
           k.output, k.rendered_prompt, k.next_step, COALESCE(k.flags, '[]') AS flags
      FROM runs r
     CROSS JOIN LATERAL jsonb_array_elements(
               CASE WHEN jsonb_typeof(r.input->'kept_outputs') = 'array'
                    THEN r.input->'kept_outputs' END) WITH ORDINALITY AS i(outs, ord)
     CROSS JOIN LATERAL jsonb_to_recordset(i.outs)
               AS k(step text, output jsonb, rendered_prompt text, next_step text, flags jsonb)
      JOIN work_units w ON w.job_id = r.id AND w.ordinal = i.ord::int - 1
     WHERE r.id = $1
), stored AS (
    INSERT INTO item_outputs (unit_id, step, step_index, output, rendered_prompt, next_step,
                              flags)
    SELECT unit_id, step, step_index, output, rendered_prompt, next_step, flags FROM kept
    ON CONFLICT (unit_id, step) DO NOTHING
)
UPDATE work_units w
   SET path = p.steps, result = p.last_output, conversation = p.turns, flags = p.flags
  FROM (SELECT unit_id, array_agg(step ORDER BY step_index) AS steps,
               -- the item keeps every flag of its outputs, in one list
               jsonb_path_query_array(jsonb_agg(flags ORDER BY step_index), '$[*][*]') AS flags,
               (array_agg(output ORDER BY step_index DESC))[1] AS last_output,
               jsonb_agg(jsonb_build_object('step', step, 'prompt', rendered_prompt,
                                            'output', output) ORDER BY step_index) AS turns
          FROM kept GROUP BY unit_id) p
 WHERE w.id = p.unit_id AND w.path = '{}';

-- name: set_job_total
-- Records how many items the job has, and its test unit, once they are all stored.
UPDATE jobs SET total_units = $2,
                test_unit_id = CASE WHEN $3 THEN (SELECT id FROM work_units
                                                    WHERE job_id = $1 AND ordinal = 0)
                               END
 WHERE id = $1;

-- name: job_total
-- The item count of a prepared job (0 until every item is stored).
SELECT total_units FROM jobs WHERE id = $1;

-- name: job_spec
-- A job's pipeline, which item activities load once per process.
SELECT spec FROM jobs WHERE id = $1;

-- name: record_step_and_start_unit
-- Stores step output $1/$2 with its flags $19 and folds it into its item ($14 ends the item
-- as completed; $20 the files the step reported, $21 its answer's session id), then
-- marks item $16 of job $15 running on worker $22, assigned at $23, unless it is finished (or
-- waits for its retry and $18 is false) and returns it with its status before and every
-- stored step output. A NULL $1 or $15 skips that half: a slice starts each item in the
-- statement that finishes the one before, so an item costs one round trip and one commit, not
-- two. Completing a job's test item records that the test passed.
WITH ins AS (
    INSERT INTO item_outputs (unit_id, step, step_index, output, rendered_prompt, next_step,
                              cost_usd, input_tokens, output_tokens, duration_ms, flags)
    SELECT $1::uuid, $2::text, $3::int, $4::jsonb, $5::text, $6::text, $7::numeric,
           $8::bigint, $9::bigint, $10::int, $19::jsonb
     WHERE $1::uuid IS NOT NULL
    ON CONFLICT (unit_id, step) DO UPDATE SET executions = item_outputs.executions + 1
    RETURNING (xmax = 0) AS inserted
), recorded AS (
    UPDATE work_units w SET
        path = CASE WHEN i.inserted THEN w.path || $2::text ELSE w.path END,
        rendered_prompt = $5,
        conversation = CASE WHEN i.inserted THEN w.conversation || $11::jsonb
                            ELSE w.conversation END,
        flags = CASE WHEN i.inserted THEN w.flags || $19::jsonb ELSE w.flags END,
        output_files = CASE WHEN i.inserted THEN w.output_files || $20::jsonb
                            ELSE w.output_files END,
        session_id = COALESCE($21::text, w.session_id),
        cost_usd = w.cost_usd + CASE WHEN i.inserted THEN $7 ELSE 0 END,
        input_tokens = w.input_tokens + CASE WHEN i.inserted THEN $8 ELSE 0 END,
        output_tokens = w.output_tokens + CASE WHEN i.inserted THEN $9 ELSE 0 END,
        result = $4,
        status = CASE WHEN $14 THEN 'completed' ELSE w.status END,
        error = CASE WHEN $14 THEN NULL ELSE w.error END,
        completed_at = CASE WHEN $14 THEN now() ELSE w.completed_at END,
        execution_ms = CASE WHEN $14 THEN $13::int ELSE w.execution_ms END,
        retry_count = GREATEST(w.retry_count, $12::int)
      FROM ins i
     WHERE w.id = $1
    RETURNING w.id, w.job_id
), tested AS (
    UPDATE jobs j SET test_passed = true
      FROM recorded r
     WHERE $14 AND j.id = r.job_id AND j.test_unit_id = r.id
), before AS (
    SELECT id, status, status IN ('pending', 'running') OR (status = 'retrying' AND $18) AS starts
      FROM work_units WHERE job_id = $15 AND ordinal = $16 FOR UPDATE
), started AS (
    UPDATE work_units w
       SET status = CASE WHEN b.starts THEN 'running' ELSE b.status END,
           started_at = COALESCE(w.started_at, now()),
           retry_count = GREATEST(w.retry_count, $17::int),
           -- The worker running it now (a retry elsewhere rewrites both); kept once finished.
           worker_id = CASE WHEN b.starts THEN $22::text ELSE w.worker_id END,
           assigned_at = CASE WHEN b.starts THEN $23::timestamptz ELSE w.assigned_at END
      FROM before b
     WHERE w.id = b.id
    RETURNING w.id, w.status, b.status AS previous_status, w.payload, w.error, w.started_at
)
SELECT s.*,
       (SELECT COALESCE(jsonb_object_agg(o.step, o.output), '{}'::jsonb)
          FROM item_outputs o WHERE o.unit_id = s.id) AS outputs
  FROM started s;

-- name: finish_unit_on_stored_path
-- Completes an item whose last step was stored before a crash cut the item short.
UPDATE work_units SET status = 'completed', completed_at = COALESCE(completed_at, now())
 WHERE id = $1 AND status <> 'completed';

-- name: fail_unit
-- Records a failed attempt ('retrying' while attempts remain, 'failed' for good), what the
-- attempt's model calls cost, and the prompt it failed on ($8, NULL when it failed before
-- rendering one) with its turn $9 added to the conversation, so a failed item shows what was
-- asked, not only the error. An item that was the job's test item failing for good records
-- that the test did not pass.
WITH failed AS (
    UPDATE work_units SET status = $2, error = $3, retry_count = GREATEST(retry_count, $4),
                          completed_at = CASE WHEN $2 = 'failed' THEN now() ELSE completed_at END,
                          cost_usd = cost_usd + $5, input_tokens = input_tokens + $6,
                          output_tokens = output_tokens + $7,
                          rendered_prompt = COALESCE($8, rendered_prompt),
                          conversation = conversation || $9::jsonb
     WHERE id = $1 AND status <> 'completed'
    RETURNING id, job_id, status
)
UPDATE jobs j SET test_passed = false
  FROM failed f
 WHERE f.status = 'failed' AND j.id = f.job_id AND j.test_unit_id = f.id;

-- name: job_cost
-- What a job's model calls cost so far, every attempt counted (its budget check).
SELECT COALESCE(sum(cost_usd), 0) FROM work_units WHERE job_id = $1;

-- name: get_job
-- One job with its run's owner and status (authorization and the job view).
SELECT j.*, r.owner, r.error_message FROM jobs j JOIN runs r ON r.id = j.run_id WHERE j.id = $1;

-- name: job_unit_counts
-- Items, cost and tokens of a job by item status.
SELECT status, count(*) AS n, COALESCE(sum(cost_usd), 0) AS cost_usd,
       COALESCE(sum(input_tokens), 0) AS input_tokens,
       COALESCE(sum(output_tokens), 0) AS output_tokens
  FROM work_units WHERE job_id = $1 GROUP BY status;

-- name: list_units
-- A page of a job's items in ordinal order, each with the step it stands at (see get_unit);
-- NULL status, step ($5) or flagged ($6: whether an output check flagged it) matches all; $3
-- is the keyset cursor.
SELECT * FROM (
    SELECT w.*, CASE WHEN cardinality(w.path) = 0 THEN j.spec->'steps'->0->>'name'
                     ELSE COALESCE(o.next_step, w.path[cardinality(w.path)]) END AS at_step
      FROM work_units w JOIN jobs j ON j.id = w.job_id
      LEFT JOIN item_outputs o ON o.unit_id = w.id AND o.step = w.path[cardinality(w.path)]
     WHERE w.job_id = $1 AND ($2::text IS NULL OR w.status = $2) AND w.ordinal > $3
) units
 WHERE ($5::text IS NULL OR at_step = $5)
   AND ($6::boolean IS NULL OR (jsonb_array_length(flags) > 0) = $6)
 ORDER BY ordinal
 LIMIT $4;

-- name: get_unit
-- One item with the run it belongs to (for authorization) and the step it stands at: the one
-- it runs (or failed at) next, the first before it ran any, its last once it completed.
SELECT w.*, j.run_id,
       CASE WHEN cardinality(w.path) = 0 THEN j.spec->'steps'->0->>'name'
            ELSE COALESCE(o.next_step, w.path[cardinality(w.path)]) END AS at_step
  FROM work_units w JOIN jobs j ON j.id = w.job_id
  LEFT JOIN item_outputs o ON o.unit_id = w.id AND o.step = w.path[cardinality(w.path)]
 WHERE w.id = $1;

-- name: list_step_outputs
-- A page of one step's outputs across a job, in item order; $3 is the keyset cursor.
SELECT o.*, w.ordinal FROM work_units w JOIN item_outputs o ON o.unit_id = w.id AND o.step = $2
 WHERE w.job_id = $1 AND w.ordinal > $3
 ORDER BY w.ordinal
 LIMIT $4;

-- name: list_unit_outputs
-- An item's step outputs in the order the steps ran.
SELECT * FROM item_outputs WHERE unit_id = $1 ORDER BY created_at, step_index;

-- name: get_unit_output
-- One step's output of an item.
SELECT * FROM item_outputs WHERE unit_id = $1 AND step = $2;

-- name: units_to_rerun
-- The items of job $1 a re-run takes, in ordinal order: those of ids $2 (NULL: all) with
-- status $3 (NULL: any).
SELECT * FROM work_units
 WHERE job_id = $1 AND ($2::uuid[] IS NULL OR id = ANY($2)) AND ($3::text IS NULL OR status = $3)
 ORDER BY ordinal;

-- name: outputs_before_step
-- The outputs of items $1 of the steps before pipeline index $2 (what a re-run keeps).
SELECT * FROM item_outputs WHERE unit_id = ANY($1::uuid[]) AND step_index < $2
 ORDER BY unit_id, step_index;

-- name: metrics_batch_items
-- Batch items (work units) by status.
SELECT status, count(*) AS items FROM work_units GROUP BY status;

-- name: archive_batch_jobs
-- The batch job, items and item outputs of each of the given runs that has a job, for the
-- retention sweep's archive.
SELECT j.run_id, jsonb_build_object(
    'job', to_jsonb(j),
    'work_units', (SELECT coalesce(jsonb_agg(to_jsonb(u) ORDER BY u.ordinal), '[]')
                     FROM work_units u WHERE u.job_id = j.id),
    'item_outputs', (SELECT coalesce(jsonb_agg(to_jsonb(o)), '[]')
                       FROM item_outputs o JOIN work_units u ON u.id = o.unit_id
                      WHERE u.job_id = j.id))::text AS sections
  FROM jobs j
 WHERE j.run_id = ANY($1::uuid[]);

-- name: delete_item_outputs_chunk
-- At most $2 item outputs of the given runs' batch jobs; run in a loop so no transaction
-- holds many row locks (the jobs and items go with their runs by ON DELETE CASCADE).
DELETE FROM item_outputs
 WHERE unit_id IN (SELECT u.id FROM work_units u JOIN jobs j ON j.id = u.job_id
                    WHERE j.run_id = ANY($1::uuid[]) LIMIT $2);
