-- Seed 002's incident: answers to prompts with an unfilled placeholder ("{session_9_output}")
-- were found only later by a QA script. An output check now flags such an answer as it is
-- stored: each step output keeps its flags, and its item every flag of its outputs (each
-- naming its step), so a job's flagged items are listed without reading every output. A
-- constant default: adding them rewrites nothing. Columns of `item_outputs` and `work_units`,
-- whose row-level security covers them.
ALTER TABLE item_outputs ADD COLUMN flags jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE work_units ADD COLUMN flags jsonb NOT NULL DEFAULT '[]'::jsonb;
