-- Issue 29's fork: a run started from another run's snapshot (`POST /runs/{id}/fork`) names
-- where it came from: {"run_id", "snapshot" (the source's step ordinal), "checkpoint" (the
-- gate the source waited on then, or null), "decision" (the one the fork applied first, or
-- null)}. Null for every other run. The source run is never written. The column is `runs`',
-- so `runs`' row-level security covers it.
ALTER TABLE runs ADD COLUMN forked_from jsonb;
