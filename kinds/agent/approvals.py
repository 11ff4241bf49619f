"""A tool call's approval: the gate it opens and the person's decision as an `Approval`.

A part of `AgentRun` (kinds/agent/host.py), the same for every framework: a PydanticAI
deferred call, a LangGraph interrupt and an OpenAI Agents SDK interruption each ask it with the
tool's name, call id, arguments and the JSON Schema of an edit, and map the `Approval` back to
their own answer (kinds/agent/turns/).
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.agent.contracts import Approval
    from waystation.kinds.agent.host import AgentHost
    from waystation.sdk import GateOption, GateSpec


class Approvals:
    """Asks a person whether a tool call may run."""

    def __init__(self, host: AgentHost) -> None:
        self._host = host

    async def ask(self, tool: str, call_id: str, arguments: dict[str, Any],
                  schema: dict[str, Any]) -> Approval[Any]:
        """A tool call's gate and the person's decision: approve, edit (the arguments to run
        with) or reject (the feedback the model reads; an expired approval is a rejection
        saying so). A decision that never came (the gate's expiry policy fails the run) ends
        the run."""
        host = self._host
        host.carry.approvals += 1
        host.waiting_for, host.phase = "approval", f"approval of {tool}"
        outcome = await host.ask_human(
            functools.partial(self._gate, tool, call_id, arguments, schema,
                              host.carry.approvals),
            where=f"{host.arg.input.agent} · turn {host.carry.turn} · waiting for "
                  f"approval of `{tool}`")
        host.waiting_for, host.phase = None, "thinking"
        decision = outcome.decision
        if decision is None:
            await host.fail(f"approval of {tool} expired", stop_reason="gate_expired")
        assert decision is not None
        if outcome.status == "expired":
            return Approval[Any](decision="reject",
                                 feedback=f"nobody approved {tool} in time; it was not run")
        if outcome.status == "rejected":
            return Approval[Any](decision="reject", decided_by=decision.decided_by,
                                 feedback=decision.feedback or f"{decision.decided_by} said no")
        return Approval[Any](decision="approve" if decision.answer is None else "edit",
                             answer=decision.answer, decided_by=decision.decided_by)

    def _gate(self, tool: str, call_id: str, arguments: dict[str, Any],
              schema: dict[str, Any], number: int) -> GateSpec:
        """The request a tool call's gate shows; built again at each (re-)opening."""
        inp, turn = self._host.arg.input, self._host.carry.turn
        return GateSpec(
            checkpoint_name=f"approve_{tool.lower()}_{number}", phase=turn,
            title=f"Allow {tool}?",
            description=(f"The {inp.agent} agent wants to call {tool} with "
                         f"{arguments}. Approve, reject with feedback (the agent is told), or "
                         "edit the arguments."),
            context={"agent": inp.agent, "turn": turn, "tool": tool,
                     "call_id": call_id, "arguments": arguments,
                     "reason": "this tool needs a human's approval",
                     "parameters_schema": schema},
            options=[GateOption(value="approve", label="Run it"),
                     GateOption(value="reject", label="Do not run it; tell the agent why"),
                     GateOption(value="edit", label="Run it with edited arguments",
                                answer="required")],
            recommended_option="approve", answer_schema=schema, answer_initial=arguments,
            expires_in=timedelta(seconds=inp.approval_timeout_seconds),
            expiry_policy=inp.approval_expiry_policy, default_option="reject")
