"""Pluggable agent backends: the one interface every crew task runs through."""

from __future__ import annotations

from waystation.activities.agents.base import AgentBackend, AgentRequest, AgentResponse
from waystation.activities.agents.choose import backend_named

__all__ = ["AgentBackend", "AgentRequest", "AgentResponse", "backend_named"]
