"""Slack as a way in (docs/slack.md): interactivity requests (`POST /slack/interactions`: a
button, a modal's submission), the slash command (`POST /slack/commands`: `/waystation link`),
and the link a Slack user opens with a Waystation credential (`GET /slack/link/{code}`). Every
request from Slack is verified by its signature and timestamp first (verify.py); every decision
goes through `api/services/slack.py`, which calls the one decide service."""
