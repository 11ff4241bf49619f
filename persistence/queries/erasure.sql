-- name: request_user_erasure
-- Notes an erasure request of $1 (a repeated request keeps the first one's time and
-- pseudonym); returns the pseudonym.
INSERT INTO user_erasures (user_name, pseudonym)
VALUES ($1, 'erased-user-' || left(replace(gen_random_uuid()::text, '-', ''), 12))
ON CONFLICT (user_name) DO UPDATE SET user_name = EXCLUDED.user_name
RETURNING pseudonym;

-- name: end_user_sessions
-- $1's console sessions end at once.
DELETE FROM console_sessions WHERE user_name = $1;

-- name: drop_user_login_codes
-- $1's console sign-in codes, used or not.
DELETE FROM console_login_codes WHERE user_name = $1;

-- name: revoke_user_api_keys
-- $1's API keys stop working at once, and so do keys made by them (before keys could no
-- longer make keys, migration 035).
UPDATE api_keys SET revoked_at = now()
 WHERE (owner = $1 OR owner IN (SELECT 'apikey:' || id FROM api_keys WHERE owner = $1))
   AND revoked_at IS NULL;

-- name: stop_user_webhooks
-- $1's own webhooks (not a group's) get nothing more from now.
UPDATE webhooks SET deleted_at = now()
 WHERE owner = $1 AND group_id IS NULL AND deleted_at IS NULL;

-- name: erasures_due
-- Erasure requests older than $1, oldest first, with their pseudonyms.
SELECT user_name, pseudonym FROM user_erasures WHERE requested_at < $1 ORDER BY requested_at;

-- name: user_has_erased_runs
-- Whether hidden runs of $1 remain (the sweep deletes them a batch at a time); runs started
-- after the request are not erased and do not count.
SELECT EXISTS (SELECT 1 FROM runs WHERE owner = $1 AND erased_at IS NOT NULL);

-- name: delete_user_contact
-- $1's email address.
DELETE FROM user_contacts WHERE user_name = $1;

-- name: delete_user_decision_links
-- The emailed decision links made for $1.
DELETE FROM decision_links WHERE user_name = $1;

-- name: delete_user_memberships
-- $1's group memberships.
DELETE FROM group_members WHERE user_name = $1;

-- name: delete_user_api_keys
-- $1's API keys.
DELETE FROM api_keys WHERE owner = $1;

-- name: delete_user_webhook_deliveries
-- What $1's own webhooks delivered (about any run), with its attempts (ON DELETE CASCADE).
DELETE FROM webhook_deliveries
 WHERE webhook_id IN (SELECT id FROM webhooks WHERE owner = $1 AND group_id IS NULL);

-- name: delete_user_webhooks
-- $1's own webhooks.
DELETE FROM webhooks WHERE owner = $1 AND group_id IS NULL;

-- name: pseudonymize_user_in_groups
-- Groups others keep name $2 where they named $1 (who made them).
UPDATE groups SET created_by = $2 WHERE created_by = $1;

-- name: pseudonymize_user_in_members
-- Memberships of others name $2 where $1 added them.
UPDATE group_members SET added_by = $2 WHERE added_by = $1;

-- name: pseudonymize_user_in_group_webhooks
-- A group's webhook $1 registered stays the group's, under $2.
UPDATE webhooks SET owner = $2 WHERE owner = $1;

-- name: pseudonymize_user_in_requests
-- Decisions $1 took on runs of others, and requests naming $1 as a decider: they stay part of
-- that run's record, under $2.
UPDATE hitl_requests
   SET decision_by = CASE WHEN decision_by = $1 THEN $2 ELSE decision_by END,
       decider_users = array_replace(decider_users, $1, $2)
 WHERE decision_by = $1 OR $1 = ANY(decider_users);

-- name: pseudonymize_user_in_votes
-- Votes $1 cast, or that were cast for $1, on runs of others.
UPDATE gate_votes
   SET voter = CASE WHEN voter = $1 THEN $2 ELSE voter END,
       on_behalf_of = CASE WHEN on_behalf_of = $1 THEN $2 ELSE on_behalf_of END
 WHERE voter = $1 OR on_behalf_of = $1;

-- name: pseudonymize_user_in_delegations
-- Delegations from or to $1 on runs of others.
UPDATE gate_delegations
   SET from_user = CASE WHEN from_user = $1 THEN $2 ELSE from_user END,
       to_user = CASE WHEN to_user = $1 THEN $2 ELSE to_user END
 WHERE from_user = $1 OR to_user = $1;

-- name: pseudonymize_user_in_gate_events
-- Gate events of others' runs that name $1 (who voted, decided, delegated, was reminded):
-- every JSON string equal to the name, and the event key that ends with it. Gate events
-- only: no other event names a person. A scan of run_events, as erasures are rare.
UPDATE run_events
   SET output = replace(output::text, to_jsonb($1::text)::text, to_jsonb($2::text)::text)::jsonb,
       event_key = CASE WHEN event_key LIKE '%.' || $1 THEN left(event_key, -length($1)) || $2
                        ELSE event_key END
 WHERE type LIKE 'gate.%'
   AND (strpos(output::text, to_jsonb($1::text)::text) > 0 OR event_key LIKE '%.' || $1);

-- name: pseudonymize_user_in_snapshots
-- Snapshots of others' runs whose state names $1 (a run's state keeps its decisions).
UPDATE run_snapshots
   SET state = replace(state::text, to_jsonb($1::text)::text, to_jsonb($2::text)::text)::jsonb
 WHERE strpos(state::text, to_jsonb($1::text)::text) > 0;

-- name: pseudonymize_user_in_deliveries
-- Webhook payloads about others' runs that name $1 (a decision's decision_by).
UPDATE webhook_deliveries
   SET payload = replace(payload::text, to_jsonb($1::text)::text, to_jsonb($2::text)::text)::jsonb
 WHERE strpos(payload::text, to_jsonb($1::text)::text) > 0;

-- name: forget_user_erasure
-- The request itself goes once carried out: afterwards the name is nowhere.
DELETE FROM user_erasures WHERE user_name = $1;

-- name: stop_user_policies
-- $1's own decision policies (not a group's) judge no gate from now.
UPDATE decision_policies SET deleted_at = now(), updated_at = now()
 WHERE owner = $1 AND group_id IS NULL AND deleted_at IS NULL;

-- name: delete_user_policies
-- $1's own decision policies, with their versions and verdicts (ON DELETE CASCADE).
DELETE FROM decision_policies WHERE owner = $1 AND group_id IS NULL;

-- name: delete_user_decision_rollups
-- The decision analytics of $1's own runs (a group's stay the group's).
DELETE FROM decision_rollups WHERE owner = $1 AND group_id IS NULL;

-- name: pseudonymize_user_in_group_policies
-- A group's policy $1 wrote stays the group's, under $2.
UPDATE decision_policies SET owner = $2 WHERE owner = $1;

-- name: pseudonymize_user_in_policy_versions
-- Versions of a group's policy $1 wrote name $2.
UPDATE decision_policy_versions SET created_by = $2 WHERE created_by = $1;
