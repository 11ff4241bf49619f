"""What a PydanticAI agent registered for the `agent` kind imports (docs/agents.md, "Bring the
agent you have"; registered under the entry-point group `waystation.agents`, or in `AGENTS` of
a `WAYSTATION_PLUGINS` module).

- `ConfiguredModel`: the capability that makes a run naming no model follow the worker's
  model configuration (WAYSTATION_AGENT_BACKEND) and prices each request.
- `MODEL_RETRY`: the bounded retry policy for its model-request activities.
- `SUMMARY_REQUEST`: how the prompt starts by which a run asks the agent for its
  `context_summary` after each turn.
- `RelatedEntities`: the capability that names the tools whose results hold the ids a run
  keeps (`related_entity_ids`) and re-primes a returning member from.
- `local_tool`: a PydanticAI `Tool` whose calls in a run are Temporal local activities (for
  fast, idempotent lookups).

A LangGraph graph imports from `waystation.kinds.agent.langgraph` instead, an OpenAI Agents SDK
agent from `waystation.kinds.agent.openai_agents`.
"""

from __future__ import annotations

from waystation.kinds.agent.activities.entities import RelatedEntities
from waystation.kinds.agent.activities.local_tools import local_tool
from waystation.kinds.agent.activities.model import MODEL_RETRY, ConfiguredModel
from waystation.kinds.agent.contracts import SUMMARY_REQUEST

__all__ = ["MODEL_RETRY", "SUMMARY_REQUEST", "ConfiguredModel", "RelatedEntities", "local_tool"]
