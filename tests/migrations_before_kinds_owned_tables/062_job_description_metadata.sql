-- Issue 29, seed 004's jobs: what a job is for (`description`) and the caller's own data about
-- it (`metadata`, a JSON object), both given at start (the API bounds their sizes), and
-- whether its test item passed (`test_passed`: NULL until the test item finished, or when the
-- job asked for none), written by the activity that finishes that item.
ALTER TABLE jobs
    ADD COLUMN description text,
    ADD COLUMN test_passed boolean,
    ADD COLUMN metadata    jsonb NOT NULL DEFAULT '{}'::jsonb;
