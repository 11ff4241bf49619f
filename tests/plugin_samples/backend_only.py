"""A plug-in that adds an agent backend and no kind."""

from waystation.activities.agents.noop import NoopBackend

AGENT_BACKENDS = {"sample_noop": lambda settings: NoopBackend()}
