-- An A2A push notification config's `token` (issue 44): opaque, chosen by the client, and
-- sent back to its receiver with every delivery (`X-A2A-Notification-Token`) so the receiver
-- can tell the notification is for the config it made. It is not the signing secret: the
-- server keys the Standard Webhooks signature itself. Sealed as `secret` is (a token is a
-- secret too); NULL for every webhook made without one (every REST one).
ALTER TABLE webhooks ADD COLUMN notification_token text;
