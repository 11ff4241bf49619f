"""What the parts of an agent run ask of the run that composes them (`AgentRun`).

The conversation (`conversation.py`), the approvals (`approvals.py`) and a framework's turns
(`turns/`) each hold one job's state and logic; the workflow owns the run's life, its
carried state and where it is, and hands itself to them as this: the recorder's methods and
the gate mechanism of `waystation.sdk.RunWorkflow`, and the few fields they read or set.
Workflow code: a part issues its commands through these methods only, in the order the run
issued them when it was one class, so recorded histories replay unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from waystation.kinds.agent.models import AgentCarry, AgentRunInput, WaitingFor
    from waystation.sdk import EventWrite, GateOutcome, GateSpec, RunLife


class AgentHost(Protocol):
    """The agent run as its parts see it."""

    # Where the run is: `phase` the `runs` row's phase name, `waiting_for` what it waits for
    # from a person (the `state` query's, and what refuses a message out of turn).
    phase: str
    waiting_for: WaitingFor | None

    @property
    def arg(self) -> AgentRunInput: ...

    @property
    def carry(self) -> AgentCarry: ...

    @property
    def life(self) -> RunLife: ...

    def event(self, key: str, type: str, **fields: Any) -> EventWrite: ...

    def stage(self, *, events: list[EventWrite] | None = None, snapshot: str | None = None,
              with_state: bool = False,
              on_written: Callable[[], None] | None = None) -> None: ...

    async def record(self, *, events: list[EventWrite] | None = None,
                     snapshot: str | None = None, with_state: bool = False) -> None: ...

    def show(self, details: str) -> None: ...

    async def fail(self, message: str, *, stop_reason: str) -> NoReturn: ...

    async def ask_human(self, make_spec: Callable[[], GateSpec], *,
                        where: str) -> GateOutcome: ...
