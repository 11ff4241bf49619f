"""What an OpenAI Agents SDK agent registered as a Waystation agent imports (docs/agents.md,
"OpenAI Agents SDK").

- `needs_approval(tool)`: the tool with `needs_approval=True`: each call stops the run at a
  Waystation gate (approve, reject with feedback the model reads, or edit the arguments).
- `configured_model(own)`: the agent's model: the worker's configured OpenAI-compatible
  endpoint, else `own` (an offline `agents.Model`, say).
- `MODEL_RETRY`, `SUMMARY_REQUEST`: as for a PydanticAI agent (waystation.sdk).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agents import FunctionTool

from activities.agent_model import MODEL_RETRY
from activities.agent_openai import configured_model
from contracts.agents import SUMMARY_REQUEST


def needs_approval(tool: Any) -> FunctionTool:
    """`tool` (a `FunctionTool`: `@function_tool`, `activity_as_tool(...)`), each call of which
    waits for a person's approval (a Waystation gate)."""
    if not isinstance(tool, FunctionTool):
        raise TypeError(f"needs_approval takes a FunctionTool, not a {type(tool).__qualname__}")
    return dataclasses.replace(tool, needs_approval=True)


__all__ = ["MODEL_RETRY", "SUMMARY_REQUEST", "configured_model", "needs_approval"]
