"""Pluggable agent backends: the one interface every crew task runs through."""

from __future__ import annotations

from activities.agents.base import AgentBackend, AgentRequest, AgentResponse
from activities.agents.choose import backend_named

__all__ = ["AgentBackend", "AgentRequest", "AgentResponse", "backend_named"]
