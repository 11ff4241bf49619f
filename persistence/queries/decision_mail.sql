-- name: put_contact
-- Sets a user's email address.
INSERT INTO user_contacts (user_name, email) VALUES ($1, $2)
ON CONFLICT (user_name) DO UPDATE SET email = EXCLUDED.email, updated_at = now()
RETURNING *;

-- name: get_contact
-- A user's email address, if any.
SELECT * FROM user_contacts WHERE user_name = $1;

-- name: deciders_with_email
-- Who may decide a request, has not voted yet, and can be written to: the run's owner, the
-- members of its group whose role the request names, and the people it names.
SELECT c.user_name, c.email
  FROM hitl_requests g JOIN runs r ON r.id = g.run_id
  JOIN user_contacts c
    ON c.user_name = r.owner
    OR c.user_name = ANY (g.decider_users)
    OR c.user_name IN (SELECT m.user_name FROM group_members m
                        WHERE m.group_id = r.group_id AND m.role = ANY (g.decider_roles))
 WHERE g.id = $1
   AND NOT EXISTS (SELECT 1 FROM gate_votes v
                    WHERE v.request_id = g.id AND v.on_behalf_of = c.user_name)
 ORDER BY c.user_name;

-- name: upsert_link
-- The link of one person for one request (a retried send finds the first one).
INSERT INTO decision_links (id, request_id, user_name, email, expires_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (request_id, user_name) DO UPDATE SET email = decision_links.email
RETURNING *;

-- name: mark_link_sent
-- The mail with this link went out.
UPDATE decision_links SET sent_at = now() WHERE id = $1 AND sent_at IS NULL;

-- name: mark_link_reminded
-- Reminder number $2 went out with this link.
UPDATE decision_links SET reminded = $2 WHERE id = $1 AND reminded < $2;

-- name: get_link
-- One link by id.
SELECT * FROM decision_links WHERE id = $1;

-- name: claim_link
-- Spends a link: only one caller gets the row back, and only before it expires.
UPDATE decision_links SET used_at = now()
 WHERE id = $1 AND used_at IS NULL AND expires_at > now()
RETURNING *;

-- name: release_link
-- Gives a spent link back when its decision was not taken (refused or not delivered).
UPDATE decision_links SET used_at = NULL WHERE id = $1;
