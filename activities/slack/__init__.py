"""Slack as a notification channel: each gate shown as a Block Kit message, kept true as the
gate changes (see channel.py), sent through Slack's Web API (web_api.py)."""
