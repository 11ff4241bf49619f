-- Seed 000's soft delete: an owner hides one run and may restore it until the retention sweep
-- deletes it, WAYSTATION_ERASURE_GRACE_HOURS after it was hidden. A hidden run is an erased run
-- (`erased_at`, migration 020): every read, list, inbox and stream already leaves those out,
-- and the sweep deletes them. `hidden_by` tells one hidden by a person (who may restore it)
-- from one hidden by an erasure request (which nobody restores; the erasure clears it). The
-- column is `runs`', so `runs`' row-level security covers it.
ALTER TABLE runs ADD COLUMN hidden_by text;
