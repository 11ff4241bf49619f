"""The `agent` run kind: a registered PydanticAI agent, LangGraph graph or OpenAI Agents SDK
agent as a durable conversation. Its console section (`console.js`) shows the conversation and
takes the next message; its hooks give the core its follow-up messages (`messages`), its
agents registry (`agents`) and a worker's model configuration and accounting
(`configure_worker`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from waystation.kinds.agent.activities.metering import Accounting, use_accounting
from waystation.kinds.agent.activities.model import model_config, use_openai_model
from waystation.kinds.agent.activities.registry import (
    agent_activities,
    register_agent,
    registered_agents,
)
from waystation.kinds.agent.demo import DEMO
from waystation.kinds.agent.models import AgentCarry, AgentInput, AgentRunInput, AgentState
from waystation.kinds.agent.workflow import AgentRun
from waystation.sdk import (
    ApiHooks,
    CliHooks,
    ConsoleHooks,
    ForkHooks,
    ForkPoint,
    ForkRefused,
    KindAgents,
    KindMessages,
    RunKind,
    RunStart,
    WorkerHooks,
    WorkerSetup,
    shorten,
)
from waystation.sdk.agents import PriceBook


def _activities(deps: Any) -> Sequence[Callable[..., Any]]:
    # Every registered agent's model-request and tool-call activities (PydanticAI's own, a
    # graph's nodes').
    return agent_activities()


def _summary(run: RunStart) -> str:
    inp: AgentInput = run.input
    opening = f": {shorten(inp.message, 60)}" if inp.message else ""
    return f"Agent {inp.agent} for {run.owner}{opening}"


def _details(run: RunStart) -> str:
    inp: AgentInput = run.input
    model = inp.model or "by the worker’s configuration"
    return (f"run {run.run_id} · agent {inp.agent} · model {model} · "
            f"approvals expire after {inp.approval_timeout_seconds} s "
            f"({inp.approval_expiry_policy})")


def _fork(run: RunStart, point: ForkPoint) -> AgentRunInput:
    """An agent run carrying on after the snapshot's last finished turn, re-primed from that
    turn's context summary as a continued run is; it waits for the next message. A snapshot
    taken during a turn (at a tool call's approval) forks from the turn before it."""
    if point.decision is not None:
        raise ForkRefused("an agent fork starts after a finished turn, where no gate is open: "
                          "it has no decision to apply", field="decision",
                          code="invalid_request")
    state = AgentState.model_validate(point.state)
    finished = point.label in (f"turn {state.turn}", "completed")  # else: during the turn
    turns = state.turn if finished else max(state.turn - 1, 0)
    return AgentRunInput(run_id=run.run_id, owner=run.owner, input=run.input,
                         carry=AgentCarry(turn=turns, context_summary=state.context_summary,
                                          last_answer=state.last_answer,
                                          related_entity_ids=state.related_entity_ids),
                         forked_from=point.forked_from)


def _routers() -> Sequence[Any]:
    from waystation.kinds.agent.routes import router

    return [router]


def _messages() -> KindMessages:
    from waystation.kinds.agent import service

    return KindMessages(send=service.send_message, transcript=service.transcript,
                        waiting=service.waits_for_message)


def _configure_worker(setup: WorkerSetup) -> None:
    # Runs naming no model follow the worker's model configuration; every model call is priced
    # by its price table and counted on its meter.
    use_openai_model(model_config(setup.settings))
    use_accounting(Accounting(PriceBook(setup.settings.model_prices), setup.meter))


AGENT = RunKind(
    name="agent", workflow=AgentRun, input_model=AgentInput, workflow_id_prefix="agent-",
    summary=_summary, details=_details,
    agents=KindAgents(register=register_agent, registered=registered_agents),
    api=ApiHooks(routers=_routers, messages=_messages),
    console=ConsoleHooks(module=Path(__file__).with_name("console.js")),
    worker=WorkerHooks(activities=_activities, configure=_configure_worker),
    forks=ForkHooks(start=_fork), cli=CliHooks(demo=DEMO),
    description="A PydanticAI agent, LangGraph graph or OpenAI Agents SDK agent as a durable "
                "conversation, with tool-call approvals (issue 12, seed 003, issue 28).")
