-- A webhook for the events of one run (an A2A task's push notification config, issue 27):
-- delivered while its owner may read the run (the run's owner, or a member of its group), as
-- a group webhook is while its owner is a member. NULL: every run of the owner or the group.
ALTER TABLE webhooks ADD COLUMN run_id uuid REFERENCES runs (id) ON DELETE CASCADE;
CREATE INDEX idx_webhooks_run ON webhooks (run_id) WHERE deleted_at IS NULL;
