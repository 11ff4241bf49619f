"""AgentRun: a user's PydanticAI agent, LangGraph graph or OpenAI Agents SDK agent, run durably
as a conversation (issue 12, seed 003, issue 28).

The run is a loop of turns: it waits, at no cost, for the next `post_message` Update (for weeks
if need be), runs the agent on it to an answer, and writes the answer with the agent's
`context_summary`. Past the history budget it continues as new at that wait, carrying the
summary and the recent turns. It composes three parts, each with one job (kinds/agent/host.py
says what they ask of the run):

- `Conversation` (conversation.py): the people's messages, the wait for the next one, a
  member who comes back after a while and the re-priming that follows;
- `Approvals` (approvals.py): a tool call's gate and the person's decision, for any framework;
- `Turns` (turns/): the agent's framework running a turn, one module per framework behind one
  interface; each model request and tool call is an activity, so a worker that dies mid-turn
  loses nothing and no completed tool call runs again.

The workflow keeps the run's life, its carried state (`AgentCarry`), where it is (`phase`,
`waiting_for`) and its Temporal surface: the `post_message` Update, the `state` query, and the
gate Updates and Signal of every run (`waystation.sdk.RunWorkflow`).

Not sandboxed: the agent object (model, toolsets, capability) lives in the worker process and
is found by name; the frameworks' own workflow-side code keeps to Temporal's rules.
"""

from __future__ import annotations

from typing import Any, NoReturn

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.exceptions import AgentRunError, UserError

    from waystation.kinds.agent.activities.registry import agent_named
    from waystation.kinds.agent.approvals import Approvals
    from waystation.kinds.agent.conversation import Conversation
    from waystation.kinds.agent.models import (
        AgentCarry,
        AgentRunInput,
        AgentRunResult,
        AgentState,
        MessageAccepted,
        MessageInput,
        WaitingFor,
    )
    from waystation.kinds.agent.turns import turns_for
    from waystation.sdk import AGENT_ANSWERED, EventWrite, RunWorkflow
    from waystation.sdk.workflow import search_attributes as sa
    from waystation.sdk.writes import RunStateWrite

# Runs that wrote a turn's answer on its own, then the wait for the next message in a second
# local activity, replay so (issue 39).
ANSWER_WITH_NEXT_WRITE_PATCH = "agent-answer-with-next-write"


@workflow.defn(name="AgentRun", sandboxed=False,
               failure_exception_types=[AgentRunError, UserError])
class AgentRun(RunWorkflow):
    @workflow.init
    def __init__(self, arg: AgentRunInput) -> None:
        self._arg = arg
        self._carry = arg.carry or AgentCarry()
        self.phase = "starting"
        self.waiting_for: WaitingFor | None = None
        self._conversation = Conversation(self)
        self._approvals = Approvals(self)
        self._turns = turns_for(agent_named(arg.input.agent), self._carry.recent, self,
                                self._approvals, self._conversation.priming)
        self.init_run(arg.run_id, snapshots_taken=self._carry.snapshots)

    @property
    def arg(self) -> AgentRunInput:
        return self._arg

    @property
    def carry(self) -> AgentCarry:
        return self._carry

    @workflow.run
    async def run(self, arg: AgentRunInput) -> AgentRunResult:
        if arg.carry is None:
            self.stage_start(agent=arg.input.agent, model=arg.input.model)
        elif arg.forked_from is not None:
            self.stage_start(agent=arg.input.agent, model=arg.input.model,
                             forked_from=arg.forked_from)
        return await self.lifecycle(self._converse)

    async def _converse(self) -> AgentRunResult:
        c, inp = self._carry, self._arg.input
        self._conversation.open()
        while True:
            if not self._conversation.has_message:
                if workflow.info().get_current_history_length() > inp.history_budget \
                        or workflow.info().is_continue_as_new_suggested():
                    await self._continue_as_new()
                if not await self._conversation.wait():
                    return await self._finish("idle")
            await self._turn(self._conversation.next())
            if c.turn >= inp.max_turns:
                return await self._finish("max_turns")

    async def _turn(self, message: MessageInput) -> None:
        c = self._carry
        c.turn += 1
        self.phase = "thinking"
        self.show(f"{self._arg.input.agent} · turn {c.turn} · thinking")
        await self.record(events=self._re_prime(), with_state=True)
        end = await self._turns.take(message)
        self.phase = "answered"
        said = {"message_id": end.message_id} if end.message_id else {}
        # The run's totals so far, named `total_usage` so that the events' usage summed into the
        # run's costs (append_run_events, migration 091) does not add them again.
        answered = [*end.events, self.event(
            f"t{c.turn}.answer", AGENT_ANSWERED, phase=c.turn, status="completed",
            output={"turn": c.turn, "text": c.last_answer, "context_summary": c.context_summary,
                    "total_usage": c.usage.model_dump(), **said})]
        if workflow.patched(ANSWER_WITH_NEXT_WRITE_PATCH):
            # The run's next write follows at once, in this workflow task (the wait for the
            # next message, the run's end or its continuation): the answer goes with it, one
            # local activity and one transaction, and the run is seen waiting as it answers.
            self.stage(events=answered, snapshot=f"turn {c.turn}", with_state=True)
            return
        await self.record(events=answered, snapshot=f"turn {c.turn}", with_state=True)

    def _re_prime(self) -> list[EventWrite]:
        """A returning member's turn starts from the summary: the transcript is set aside."""
        if self._conversation.returning is None:
            return []
        self._turns.set_aside()
        return [self._conversation.returned_event()]

    # --- messages ----------------------------------------------------------------------

    @workflow.update
    async def post_message(self, message: MessageInput) -> MessageAccepted:
        """A person's next message; refused unless the run waits for one."""
        return await self._conversation.accept(message)

    @post_message.validator
    def _validate_post_message(self, message: MessageInput) -> None:
        self._conversation.check_waiting()

    # --- continuing and ending ---------------------------------------------------------

    async def _continue_as_new(self) -> NoReturn:
        c = self._carry
        c.continued += 1
        c.recent = self._turns.recent(self._arg.input.keep_recent_turns)

        def carried(snapshots: int) -> AgentRunInput:
            c.snapshots = snapshots
            # A fork's continuation is a continuation: its run.started is written already.
            return self._arg.model_copy(update={"carry": c, "forked_from": None})
        await self.continue_as_new(carried)

    async def _finish(self, reason: str) -> AgentRunResult:
        c = self._carry
        self.waiting_for, self.phase = None, reason
        result = AgentRunResult(run_id=self.run_id, status="completed", stop_reason=reason,
                                turns=c.turn, usage=c.usage, context_summary=c.context_summary)
        await self.complete(result, stop_reason=reason,
                            details=f"completed · {reason} after {c.turn} turns", turns=c.turn)
        return result

    # --- the base's hooks --------------------------------------------------------------

    @workflow.query
    def state(self) -> AgentState:
        c = self._carry
        return AgentState(agent=self._arg.input.agent, model=self._arg.input.model, turn=c.turn,
                          waiting_for=self.waiting_for,
                          context_summary=c.context_summary, last_answer=c.last_answer,
                          usage=c.usage, continued=c.continued,
                          related_entity_ids=c.related_entity_ids, returns=c.returns)

    def position(self) -> tuple[int, str | None]:
        return self._carry.turn, self.phase

    def kind_state(self) -> dict[str, Any]:
        return self.state().model_dump(mode="json")

    def search_attribute_updates(self) -> list[Any]:
        # Waiting for a message is waiting for a human too (WaystationAwaitingHuman).
        life = self._life
        return [sa.STATUS.value_set(life.status),
                sa.AWAITING_HUMAN.value_set(life.waiting_on is not None
                                            or self.waiting_for is not None)]

    def _run_state(self, result: dict[str, Any] | None = None) -> RunStateWrite:
        # The summary and the related entities are the kind's own (`agent_runs`, its migration
        # 088): they travel with each write of the run's state as `kind_fields`, which the
        # core's write hands to the kind's SQL in the same statement (persistence migration
        # 087), so they commit with the run's row or not at all. Only the local activity's
        # input changes: the workflow's commands, and so every recorded history, do not.
        state = super()._run_state(result)
        fields = {"context_summary": self._carry.context_summary,
                  "related_entity_ids": self._carry.related_entity_ids or None}
        state.kind_fields = {k: v for k, v in fields.items() if v is not None} or None
        return state
