-- A gate's Slack message and its thread replies posted once, a crash or not. Slack's
-- chat.postMessage takes no idempotency key: a worker killed (or an attempt timed out) between
-- Slack's answer and the row recording its `ts` would post the message again on retry. So the
-- intent to post is committed before the call, and each post carries metadata naming what it
-- is; a retry that finds an intent without its outcome looks for the message in the channel
-- (or the thread) by that metadata and adopts it (activities/slack/posted.py).
--
-- post_started_at: when the first attempt at the message's post began (with its `channel`,
--   a DM's conversation id included, recorded at the same moment); NULL: never tried.
-- reply_started_at: when the first attempt at thread replies not yet counted in `reminders`
--   and `escalated` began; NULL once they are counted.
ALTER TABLE slack_messages
    ADD COLUMN post_started_at timestamptz,
    ADD COLUMN reply_started_at timestamptz;
