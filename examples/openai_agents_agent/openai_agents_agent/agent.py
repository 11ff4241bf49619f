"""The `refunds_desk` agent: a plain OpenAI Agents SDK `Agent`, plus what makes it a Waystation
agent.

- Its tool is a Temporal activity made a tool by the integration's `activity_as_tool`: inside the
  `agent` run each call is an activity (`openai_agents_agent.issue_refund`), so a worker that
  dies mid-turn repeats no completed refund. A `@function_tool` would run in the workflow
  instead (deterministic code only).
- `needs_approval(...)` (the SDK's `needs_approval=True`): each call stops the run at a
  Waystation gate: approve, reject with feedback the model reads, or edit the arguments,
  checked against the tool's parameters schema.
- `configured_model(...)`: a run follows the worker's model configuration
  (`WAYSTATION_AGENT_BACKEND=openai`: the configured endpoint); otherwise the agent keeps its
  own model, the offline one here. Each model call is the integration's model activity.
"""

from __future__ import annotations

from datetime import timedelta

from agents import Agent
from temporalio.openai_agents.workflow import activity_as_tool

from openai_agents_agent.model import OfflineDesk
from openai_agents_agent.tools import issue_refund
from waystation.kinds.agent.openai_agents import configured_model, needs_approval

INSTRUCTIONS = ("You are a shop's refunds desk. Refund the order the customer names with "
                "issue_refund (a person approves each refund) and say what happened. Be brief.")

refunds_desk = Agent(
    name="refunds_desk", instructions=INSTRUCTIONS, model=configured_model(OfflineDesk()),
    tools=[needs_approval(activity_as_tool(issue_refund,
                                           start_to_close_timeout=timedelta(minutes=1)))])
