-- name: insert_webhook
-- Registers a webhook.
INSERT INTO webhooks (id, owner, group_id, url, secret, events, run_id, notification_token,
                      notification_authorization)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING *;

-- name: lock_user_webhooks
-- Serializes webhook registration of one user, so that two at once cannot pass the cap together.
SELECT pg_advisory_xact_lock(hashtextextended('webhooks:' || $1, 0));

-- name: count_live_webhooks
-- How many live webhooks user $1 holds: for one run each (A2A push configs) when $2, else not.
SELECT count(*) FROM webhooks
 WHERE owner = $1 AND deleted_at IS NULL AND (run_id IS NOT NULL) = $2;

-- name: list_webhooks
-- The webhooks a user registered (every one for NULL), oldest first; with a run, only those
-- for that one run.
SELECT * FROM webhooks
 WHERE deleted_at IS NULL AND ($1::text IS NULL OR owner = $1)
   AND ($2::uuid IS NULL OR run_id = $2)
 ORDER BY created_at, id;

-- name: delete_webhook
-- Stops a webhook (kept for its delivery log); its pending deliveries are canceled.
WITH gone AS (
    UPDATE webhooks SET deleted_at = now()
     WHERE id = $1 AND deleted_at IS NULL AND ($2::text IS NULL OR owner = $2)
    RETURNING id
), canceled AS (
    UPDATE webhook_deliveries SET status = 'canceled'
     WHERE webhook_id IN (SELECT id FROM gone) AND status = 'pending'
)
SELECT id FROM gone;

-- name: enqueue_deliveries
-- One delivery per live webhook that wants this event of this run: the owner's own, the
-- group's (registered by a member who still is one), and those for this one run (registered
-- by someone who may still read it); a repeated enqueue adds nothing. Answers whether the
-- event has deliveries still to make, these or an earlier try's, in the same round trip (the
-- outer query's snapshot does not see the rows just added, hence `added`).
WITH added AS (
    INSERT INTO webhook_deliveries (id, webhook_id, run_id, event_key, event_type, payload)
    SELECT gen_random_uuid(), w.id, r.id, $2, $3, $4
      FROM runs r JOIN webhooks w
        ON (w.run_id IS NULL AND w.group_id IS NULL AND w.owner = r.owner)
        OR (w.run_id IS NULL AND w.group_id = r.group_id
            AND EXISTS (SELECT 1 FROM group_members m
                         WHERE m.group_id = w.group_id AND m.user_name = w.owner))
        OR (w.run_id = r.id
            AND (w.owner = r.owner
                 OR EXISTS (SELECT 1 FROM group_members m
                             WHERE m.group_id = r.group_id AND m.user_name = w.owner)))
     WHERE r.id = $1 AND w.deleted_at IS NULL AND $3 = ANY (w.events)
    ON CONFLICT (webhook_id, event_key) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM added)
    OR EXISTS (SELECT 1 FROM webhook_deliveries
                WHERE run_id = $1 AND event_key = $2 AND status = 'pending');

-- name: pending_deliveries_of
-- The deliveries of some events of a run still to make (a retried enqueue finds them again).
SELECT id, event_key FROM webhook_deliveries
 WHERE run_id = $1 AND event_key = ANY ($2::text[]) AND status = 'pending';

-- name: delivery_to_send
-- A delivery with where and how to send it.
SELECT d.*, w.url, w.secret, w.notification_token, w.notification_authorization,
       w.deleted_at AS webhook_deleted_at
  FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
 WHERE d.id = $1;

-- name: record_attempt
-- One attempt and its outcome; the delivery counts it. The attempt's number is one more than
-- the delivery's count when it began, so an attempt recorded twice is recorded once.
WITH attempt AS (
    INSERT INTO webhook_attempts (delivery_id, attempt, status_code, error, duration_ms)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (delivery_id, attempt) DO NOTHING
    RETURNING delivery_id
)
UPDATE webhook_deliveries d
   SET attempts = GREATEST(d.attempts, $2), last_status = $3, last_error = $4,
       status = CASE WHEN $6 THEN 'delivered' ELSE d.status END,
       delivered_at = CASE WHEN $6 THEN now() ELSE d.delivered_at END
 WHERE d.id = $1 AND d.status = 'pending';

-- name: finish_delivery
-- A delivery given up on (retries spent) or no longer wanted (webhook deleted).
UPDATE webhook_deliveries SET status = $2 WHERE id = $1 AND status = 'pending';

-- name: list_deliveries
-- A webhook's delivery log, newest first.
SELECT * FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY created_at DESC, id DESC
 LIMIT $2;

-- name: webhook_secrets
-- Every stored secret, notification token (migration 065) and authorization (083), deleted
-- webhooks' too (persistence/sealing.py: reseal).
SELECT id, secret, notification_token, notification_authorization FROM webhooks ORDER BY id;

-- name: reseal_webhook_secret
-- Only if unchanged since it was read: a concurrent reseal wins once.
UPDATE webhooks SET secret = $3, notification_token = $5, notification_authorization = $7
 WHERE id = $1 AND secret = $2 AND notification_token IS NOT DISTINCT FROM $4
   AND notification_authorization IS NOT DISTINCT FROM $6;
