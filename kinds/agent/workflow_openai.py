"""The OpenAI Agents SDK adapter of AgentRun: a registered `agents.Agent` run a turn at a time
through Temporal's OpenAI Agents integration, its items as the run's transcript events, its
tool approvals as gates (docs/agents.md, "OpenAI Agents SDK").

Workflow code. A turn is `TemporalOpenAIRunner.run` (each model call the integration's
activity, each `activity_as_tool` tool an activity) on the conversation's input items and the
person's message; a tool that needs approval stops it with `interruptions`, and the turn goes on
from `result.to_state()` with each decision applied (`approve`, or `reject` with the feedback
as the message the model sees; an edit approves and hands the tool the edited arguments for that
call id: waystation.kinds.agent.activities.openai.edited_arguments). A `RunState` never leaves the
workflow (round-tripped through JSON it would resume with the agent as written, not as the
integration converted it); between turns, and across continue-as-new, the conversation is
`result.to_input_list()`.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agents import (
        HandoffOutputItem,
        RunConfig,
        RunResult,
        ToolApprovalItem,
        ToolCallItem,
        ToolCallOutputItem,
    )
    from agents.exceptions import (
        InputGuardrailTripwireTriggered,
        OutputGuardrailTripwireTriggered,
    )
    from temporalio.openai_agents._openai_runner import TemporalOpenAIRunner

    from waystation.kinds.agent.activities.live import MESSAGE_ID_KEY
    from waystation.kinds.agent.activities.openai import (
        COST_KEY,
        MODEL_ACTIVITY,
        MODEL_KEY,
        OpenAIAgent,
        edited_arguments,
    )
    from waystation.kinds.agent.contracts import MODEL_RESPONDED
    from waystation.kinds.agent.models import AgentUsage
    from waystation.kinds.agent.transcript import MakeEvent
    from waystation.sdk import TOOL_CALLED, TOOL_RETURNED, EventWrite

AGENT_HANDOFF = "agent.handoff"
GUARDRAIL_TRIPPED = "guardrail.tripped"
# Tracing would export spans from the workflow: off (the run's events are its record).
RUN_CONFIG = RunConfig(tracing_disabled=True)

# A decision as the SDK takes it: ("approve", None), ("edit", arguments) or ("reject", message).
Decision = tuple[str, Any]


class Tripped(Exception):
    """A guardrail tripped: the turn ends with it."""

    def __init__(self, kind: str, name: str, output: Any) -> None:
        super().__init__(f"{kind} guardrail {name} tripped")
        self.kind, self.name, self.output = kind, name, output


class AgentConversation:
    """One run's agent and its conversation so far (the SDK's input items)."""

    def __init__(self, agent: OpenAIAgent, recent: list[dict[str, Any]]) -> None:
        self.agent = agent
        self.history: list[dict[str, Any]] = [dict(item) for item in recent]
        self._runner = TemporalOpenAIRunner(MODEL_ACTIVITY)
        self._result: RunResult | None = None
        self._head: list[dict[str, Any]] = []
        self._edits: dict[str, dict[str, Any]] = {}

    async def start(self, text: str, priming: str | None) -> RunResult:
        """Run the agent on the history and the person's message (the re-priming, if any, at
        the head, not kept)."""
        self._edits = {}
        self._head = [{"role": "system", "content": priming}] if priming else []
        return await self._run([*self._head, *self.history, {"role": "user", "content": text}])

    async def resume(self, decisions: list[tuple[ToolApprovalItem, Decision]]) -> RunResult:
        """Go on from the interrupted run with each approval's decision."""
        assert self._result is not None
        state = self._result.to_state()
        for item, (decision, value) in decisions:
            if decision == "reject":
                state.reject(item, rejection_message=value)
                continue
            if decision == "edit":
                self._edits[str(item.call_id)] = value
            state.approve(item)
        return await self._run(state)

    async def ask(self, prompt: str) -> RunResult:
        """A request outside the conversation (the run's summary): nothing is kept."""
        items: list[Any] = [*self.history, {"role": "user", "content": prompt}]
        with edited_arguments({}):
            return await self._runner.run(self.agent.agent, items, run_config=RUN_CONFIG)

    async def _run(self, run_input: Any) -> RunResult:
        try:
            with edited_arguments(self._edits):
                self._result = await self._runner.run(self.agent.agent, run_input,
                                                      run_config=RUN_CONFIG)
        except InputGuardrailTripwireTriggered as error:
            guardrail = error.guardrail_result.guardrail
            raise Tripped("input", guardrail.get_name(),
                          error.guardrail_result.output.output_info) from error
        except OutputGuardrailTripwireTriggered as error:
            raise Tripped("output", error.guardrail_result.guardrail.get_name(),
                          error.guardrail_result.output.output_info) from error
        return self._result

    def take(self, result: RunResult) -> None:
        self.history = [dict(item) for item in _jsonable(result.to_input_list())
                        if item not in self._head]

    def turn_start(self) -> int:
        """Where this turn's items begin in the history: its person's message."""
        for index in range(len(self.history) - 1, -1, -1):
            if self.history[index].get("role") == "user":
                return index
        return 0

    def recent(self, turns: int) -> list[dict[str, Any]]:
        """The last `turns` turns' items, for a continuation."""
        if turns == 0:
            return []
        starts = [i for i, item in enumerate(self.history) if item.get("role") == "user"]
        return self.history[starts[-turns]:] if len(starts) >= turns else list(self.history)


def call_of(item: ToolApprovalItem) -> tuple[str, str, dict[str, Any]]:
    """The tool an approval asks about, its call id and its arguments."""
    raw = item.arguments or "{}"
    try:
        arguments = json.loads(raw)
    except ValueError:
        arguments = {"arguments": raw}
    return str(item.name), str(item.call_id), arguments if isinstance(arguments, dict) \
        else {"arguments": arguments}


def answer(result: RunResult) -> str:
    output = result.final_output
    return "" if output is None else output if isinstance(output, str) else json.dumps(
        _jsonable(output))


def agent_events(make: MakeEvent, turn: int, result: RunResult, seen: dict[str, int],
                 usage: AgentUsage, prefix: str = "") -> list[EventWrite]:
    """Events of the items and model responses `result` has beyond those `seen` (counts, kept
    by the caller per turn: a resumed run's result holds the turn's earlier ones too), keyed by
    their positions in the turn, so each is recorded once; their usage summed into `usage`."""
    events: list[EventWrite] = []
    responses, items = result.raw_responses, result.new_items
    # In the order they happened: a response's event before the first item it produced (a
    # tool's call, a message), so a tool's result comes before the response that read it.
    # (Ids more than one response carries, such as the SDK's placeholder for Chat Completions
    # messages, say nothing.)
    made_by: dict[str, int | None] = {}
    for index, response in enumerate(responses):
        for ident in {i for o in response.output for i in _ids(o)}:
            made_by[ident] = index if ident not in made_by else None
    next_response = seen.get("responses", 0)

    def responses_up_to(last: int) -> None:
        nonlocal next_response
        while next_response <= last:
            events.append(_response_event(make, turn, result, responses[next_response],
                                          f"t{turn}.{prefix}r{next_response}", usage))
            next_response += 1

    for index in range(seen.get("items", 0), len(items)):
        item, at = items[index], f"t{turn}.{prefix}i{index}"
        produced = [r for r in (made_by.get(i) for i in _ids(item.raw_item)) if r is not None]
        if produced:
            responses_up_to(max(produced))
        if isinstance(item, ToolCallItem):
            raw = _jsonable(item.raw_item)
            name, call_id = raw.get("name"), raw.get("call_id")
            try:
                arguments = json.loads(raw.get("arguments") or "{}")
            except ValueError:
                arguments = raw.get("arguments")
            events.append(make(f"{at}.call", TOOL_CALLED, phase=turn, task=name,
                               status="started", output={"turn": turn, "tool": name,
                                                         "call_id": call_id,
                                                         "arguments": arguments}))
        elif isinstance(item, ToolCallOutputItem):
            raw = _jsonable(item.raw_item)
            events.append(make(f"{at}.result", TOOL_RETURNED, phase=turn,
                               task=_tool_of(items, raw.get("call_id")), status="completed",
                               output={"turn": turn, "tool": _tool_of(items,
                                                                      raw.get("call_id")),
                                       "call_id": raw.get("call_id"),
                                       "result": _text(item.output)}))
        elif isinstance(item, HandoffOutputItem):
            events.append(make(f"{at}.handoff", AGENT_HANDOFF, phase=turn,
                               agent=item.target_agent.name, status="handed off",
                               output={"turn": turn, "from": item.source_agent.name,
                                       "to": item.target_agent.name}))
    responses_up_to(len(responses) - 1)
    seen["responses"], seen["items"] = len(responses), len(items)
    return events


def _response_event(make: MakeEvent, turn: int, result: RunResult, response: Any, key: str,
                    usage: AgentUsage) -> EventWrite:
    """One model response's event; its usage summed into `usage`."""
    inputs, outputs = response.usage.input_tokens, response.usage.output_tokens
    # Priced in the model activity (waystation.kinds.agent.activities.openai.PricedModel): in
    # history.
    raw = response.raw_usage or {}
    cost = float(raw.get(COST_KEY, 0.0))
    usage.requests += 1
    usage.input_tokens += inputs
    usage.output_tokens += outputs
    usage.cost_usd += cost
    text = " ".join(part.text for o in response.output if getattr(o, "type", "") == "message"
                    for part in getattr(o, "content", []) if hasattr(part, "text"))
    said = {"message_id": raw[MESSAGE_ID_KEY]} if raw.get(MESSAGE_ID_KEY) else {}
    return make(f"{key}.response", MODEL_RESPONDED, phase=turn, status="completed",
                agent=result.last_agent.name, output={
                    "model": raw.get(MODEL_KEY), "text": text or None, **said,
                    # Summed into the run's columns by migration 010's trigger.
                    "usage": {"input_tokens": inputs, "output_tokens": outputs,
                              "cost_usd": cost}})


def answer_message_id(result: RunResult) -> str | None:
    """The id the answer's live tokens carried: its response's (the run's last)."""
    raw = result.raw_responses[-1].raw_usage or {} if result.raw_responses else {}
    id = raw.get(MESSAGE_ID_KEY)
    return id if isinstance(id, str) else None


def _ids(raw: Any) -> list[str]:
    """The ids an output item is known by (a message's id, a tool call's id and call id)."""
    value = _jsonable(raw)
    if not isinstance(value, dict):
        return []
    return [str(value[k]) for k in ("id", "call_id") if value.get(k)]


def tripped_event(make: MakeEvent, turn: int, tripped: Tripped) -> EventWrite:
    return make(f"t{turn}.guardrail", GUARDRAIL_TRIPPED, phase=turn, task=tripped.name,
                status="tripped", output={"turn": turn, "guardrail": tripped.name,
                                          "kind": tripped.kind,
                                          "info": _jsonable(tripped.output)})


def _tool_of(items: list[Any], call_id: Any) -> str | None:
    for item in items:
        if isinstance(item, ToolCallItem) and _jsonable(item.raw_item).get("call_id") == call_id:
            return str(_jsonable(item.raw_item).get("name"))
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(_jsonable(value))


def _jsonable(value: Any) -> Any:
    """The SDK's items (pydantic models, dicts of them) as JSON values."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
