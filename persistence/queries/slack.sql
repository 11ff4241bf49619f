-- name: slack_user_of
-- The Waystation user a Slack user is linked to, unless the key that linked them is revoked.
SELECT s.user_name, s.linked_at
  FROM slack_users s LEFT JOIN api_keys k ON k.id = s.api_key_id
 WHERE s.team_id = $1 AND s.slack_user = $2
   AND (s.api_key_id IS NULL OR k.revoked_at IS NULL);

-- name: slack_ids_of
-- The Slack users linked to a Waystation user (for DMs), newest link first.
SELECT s.slack_user
  FROM slack_users s LEFT JOIN api_keys k ON k.id = s.api_key_id
 WHERE s.user_name = $1 AND (s.api_key_id IS NULL OR k.revoked_at IS NULL)
 ORDER BY s.linked_at DESC;

-- name: insert_slack_link_code
-- A one-time link code for a Slack user (its hash); codes expired a day ago are forgotten.
WITH forgotten AS (
    DELETE FROM slack_link_codes WHERE expires_at < now() - interval '1 day'
)
INSERT INTO slack_link_codes (code_hash, team_id, slack_user, expires_at)
VALUES ($1, $2, $3, $4);

-- name: claim_slack_link_code
-- Spend a code once, while it is fresh: the Slack user it links, or nothing.
UPDATE slack_link_codes SET used_at = now()
 WHERE code_hash = $1 AND used_at IS NULL AND expires_at > now()
RETURNING team_id, slack_user;

-- name: link_slack_user
-- Link (or link again, to whoever opened the newest code) a Slack user.
INSERT INTO slack_users (team_id, slack_user, user_name, api_key_id)
VALUES ($1, $2, $3, $4)
ON CONFLICT (team_id, slack_user)
DO UPDATE SET user_name = EXCLUDED.user_name, api_key_id = EXCLUDED.api_key_id,
              linked_at = now()
RETURNING team_id, slack_user, user_name, linked_at;

-- name: known_user
-- Whether $1 is someone here, as the connection acting as $1 sees it: has signed in to the
-- console, holds a live API key, or is a member of a group. An erasure ends all three.
SELECT EXISTS (SELECT 1 FROM console_sessions WHERE user_name = $1)
    OR EXISTS (SELECT 1 FROM api_keys WHERE owner = $1 AND revoked_at IS NULL)
    OR EXISTS (SELECT 1 FROM group_members WHERE user_name = $1);

-- name: delete_user_slack_links
-- A person's Slack identities end with their access (erasure).
DELETE FROM slack_users WHERE user_name = $1;

-- name: note_slack_request
-- A request from Slack seen for the first time (true), or again: a replay or a retry (false).
-- Signatures older than Slack's five minutes are forgotten on the way.
WITH forgotten AS (
    DELETE FROM slack_requests_seen WHERE seen_at < now() - interval '10 minutes'
)
INSERT INTO slack_requests_seen (signature) VALUES ($1)
ON CONFLICT (signature) DO NOTHING
RETURNING true;

-- name: lock_run_slack_messages
-- One sender at a time brings a run's messages up to date (held by the session until
-- unlocked, or until its connection ends): two would post the same message twice.
SELECT pg_advisory_lock(hashtextextended('slack:' || $1::uuid::text, 0));

-- name: unlock_run_slack_messages
-- The run's messages are up to date (or left to a retry).
SELECT pg_advisory_unlock(hashtextextended('slack:' || $1::uuid::text, 0));

-- name: run_gates_for_slack
-- A run's requests that have a message or should have one: the pending ones, and those that
-- have been shown.
SELECT g.* FROM hitl_requests g
 WHERE g.run_id = $1
   AND (g.status = 'pending' OR EXISTS (SELECT 1 FROM slack_messages m
                                         WHERE m.request_id = g.id))
 ORDER BY g.created_at;

-- name: slack_messages_of
-- The messages showing a request.
SELECT * FROM slack_messages WHERE request_id = $1 ORDER BY audience;

-- name: slack_deciders_of
-- Who may decide a request and has not voted: the run's owner, the members of its group whose
-- role the request names, and the people it names.
SELECT DISTINCT u.user_name
  FROM hitl_requests g JOIN runs r ON r.id = g.run_id,
       LATERAL (SELECT r.owner AS user_name
                UNION SELECT unnest(g.decider_users)
                UNION SELECT m.user_name FROM group_members m
                       WHERE m.group_id = r.group_id AND m.role = ANY (g.decider_roles)) u
 WHERE g.id = $1
   AND NOT EXISTS (SELECT 1 FROM gate_votes v
                    WHERE v.request_id = g.id AND v.on_behalf_of = u.user_name)
 ORDER BY u.user_name;

-- name: upsert_slack_message
-- A message's row, made before its first send so the send log has a place.
INSERT INTO slack_messages (request_id, audience) VALUES ($1, $2)
ON CONFLICT (request_id, audience) DO UPDATE SET request_id = EXCLUDED.request_id
RETURNING *;

-- name: slack_post_started
-- The intent to post the message to `channel`, committed before chat.postMessage is called:
-- a retry finding it without a `ts` looks for the message in Slack before posting again. The
-- first attempt's time is kept: a post lost by any attempt is no older than it.
UPDATE slack_messages
   SET channel = $3, post_started_at = coalesce(post_started_at, now()), updated_at = now()
 WHERE request_id = $1 AND audience = $2
RETURNING *;

-- name: slack_reply_started
-- The intent to reply in the message's thread (reminders, an escalation), committed before the
-- first such chat.postMessage: a retry finding it looks in the thread before replying again.
UPDATE slack_messages
   SET reply_started_at = coalesce(reply_started_at, now()), updated_at = now()
 WHERE request_id = $1 AND audience = $2
RETURNING *;

-- name: slack_message_sent
-- What a send made of the message: where it is, what it shows, its thread replies, and
-- whether replies are still being made (`reply_started_at`, NULL once all are counted).
UPDATE slack_messages
   SET channel = $3, ts = $4, shown = $5, reminders = $6, escalated = $7,
       reply_started_at = $8, attempts = attempts + 1, last_error = NULL, updated_at = now()
 WHERE request_id = $1 AND audience = $2;

-- name: slack_message_failed
-- A send that failed, for the log; the workflow's retries send it again.
UPDATE slack_messages SET attempts = attempts + 1, last_error = $3, updated_at = now()
 WHERE request_id = $1 AND audience = $2;

-- name: slack_messages_of_run
-- The messages showing any request of a run, erased or not (an erased run's messages are
-- emptied of what they showed).
SELECT m.* FROM slack_messages m JOIN hitl_requests g ON g.id = m.request_id
 WHERE g.run_id = $1 ORDER BY m.request_id, m.audience;
