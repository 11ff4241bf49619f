"""The planner agent: a PydanticAI agent over the catalogue, durable on Temporal.

`TemporalDurability` makes each model request and each tool call an activity when the agent
runs inside a workflow (and changes nothing outside one, which the benchmark's in-process
baseline uses). `book_vendor` needs a human's approval: the agent stops with a
`DeferredToolRequests` and the `agent` run kind turns it into a gate. `ConfiguredModel` lets a
run that names no model follow WAYSTATION_AGENT_BACKEND (`openai`: the configured endpoint).
`RelatedEntities` keeps the vendors shortlisted or booked on the run (`related_entity_ids`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, Tool
from pydantic_ai.durable_exec.temporal import TemporalDurability
from temporalio.workflow import ActivityConfig

from waystation.kinds.agent.activities.entities import RelatedEntities
from waystation.kinds.agent.activities.local_tools import local_tool
from waystation.kinds.agent.activities.model import MODEL_RETRY, ConfiguredModel
from waystation.kinds.agent.planner.catalogue import (
    book_vendor,
    booked_ids,
    check_availability,
    search_vendors,
    shortlist,
    shortlisted_ids,
)
from waystation.kinds.agent.planner.model import planner_model

# A model request beats every few seconds while it waits for the model, so a worker that dies
# mid-request is noticed after 5 s (PydanticAI's default: 30 s) and the request retried, by
# MODEL_RETRY (bounded; PydanticAI's default retries for ever).
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
INSTRUCTIONS = ("You help a group plan a wedding. Search the vendor catalogue, shortlist what "
                "they like, check availability and book (a booking needs approval). Be brief.")



def _local(function: Callable[..., Awaitable[Any]]) -> Tool[Any]:
    # Its local activity named as when the catalogue was `activities.planner.catalogue`, before
    # the agent kind moved to kinds/agent/: runs recorded then replay their tool calls.
    return local_tool(function, activity_name="local_tool__activities.planner.catalogue."
                                              + function.__qualname__)


planner: Agent[None, str | DeferredToolRequests] = Agent(
    planner_model(), name="planner", instructions=INSTRUCTIONS,
    output_type=[str, DeferredToolRequests],
    # The catalogue lookups are fast and local: local activities (no server round trip);
    # the booking, which needs approval, stays a regular activity.
    tools=[_local(search_vendors), _local(shortlist), _local(check_availability),
           Tool(book_vendor, requires_approval=True)],
    capabilities=[TemporalDurability(
        model_activity_config=ActivityConfig(heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
                                             retry_policy=MODEL_RETRY)),
        ConfiguredModel(),
        # The vendors shortlisted or booked are the run's related entities (seed 003).
        RelatedEntities({"shortlist": shortlisted_ids, "book_vendor": booked_ids})])
