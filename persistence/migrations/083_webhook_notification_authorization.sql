-- An A2A push notification config's `authentication` (issue 44): the scheme and credentials
-- the agent MUST send its receiver with each delivery, kept as the `Authorization` header's
-- value (`<scheme> <credentials>`). Sealed as `secret` and `notification_token` are; NULL for
-- every webhook made without one (every REST one).
ALTER TABLE webhooks ADD COLUMN notification_authorization text;
