"""The `refunds` agent: a plain PydanticAI agent, plus what makes it a Waystation agent.

- `TemporalDurability()` (required): inside the `agent` run each model request and each tool
  call is a Temporal activity, so a worker that dies mid-turn repeats no completed refund.
- `requires_approval=True`: the agent stops before `issue_refund`, and the run asks a person
  at a gate (approve, reject with feedback the model reads, or edit the arguments).
- `ConfiguredModel()` (optional): a run that names no model follows the worker's model
  configuration (`WAYSTATION_AGENT_BACKEND=openai`: the configured endpoint) and each request is
  priced and counted; otherwise the agent keeps its own model, the offline one here.
"""

from __future__ import annotations

from pydantic_ai import Agent, DeferredToolRequests, Tool
from pydantic_ai.durable_exec.temporal import TemporalDurability
from temporalio.workflow import ActivityConfig

from pydantic_ai_agent.model import offline_model
from pydantic_ai_agent.tools import issue_refund
from waystation.kinds.agent.sdk import MODEL_RETRY, ConfiguredModel

INSTRUCTIONS = ("You are a shop's refunds desk. Refund the order the customer names with "
                "issue_refund (a person approves each refund) and say what happened. Be brief.")

refunds: Agent[None, str | DeferredToolRequests] = Agent(
    offline_model(), name="refunds", instructions=INSTRUCTIONS,
    # DeferredToolRequests: the output an approval stops the agent with.
    output_type=[str, DeferredToolRequests],
    tools=[Tool(issue_refund, requires_approval=True)],
    capabilities=[TemporalDurability(model_activity_config=ActivityConfig(
        retry_policy=MODEL_RETRY)), ConfiguredModel()])
