"""What a LangGraph graph registered as a Waystation agent imports (docs/agents.md, "LangGraph").

- `Approval`: the decision a gate hands back; a node asks for one with
  `interrupt({"tool": ..., "call_id": ..., "arguments": {...}}, response_schema=Approval[Args])`
  and gets an `Approval` (approve, reject with `feedback`, or edit with `answer`, an `Args`).
- `configured_chat_model(own)`: the chat model a node calls: the worker's configured
  OpenAI-compatible endpoint, else the graph's own (an offline model, say).
- `MODEL_RETRY`, `SUMMARY_REQUEST`: as for a PydanticAI agent (waystation.kinds.agent.sdk).
"""

from __future__ import annotations

from waystation.kinds.agent.activities.langgraph import configured_chat_model
from waystation.kinds.agent.activities.model import MODEL_RETRY
from waystation.kinds.agent.contracts import SUMMARY_REQUEST, Approval

__all__ = ["MODEL_RETRY", "SUMMARY_REQUEST", "Approval", "configured_chat_model"]
