"""What the parts of a batch job ask of the job that composes them (`BatchJob`).

The slices (`slices.py`), the budget (`budget.py`) and the test item (`trial.py`) each hold
one job's logic; the workflow owns the job's life, its counts and queues (`BatchProgress`),
why it must stop early, a fork's decision, and its Temporal surface, and hands itself to them
as this. Workflow code: a part issues its commands through these methods only, in the order
the job issued them when it was one class, so recorded histories replay unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from pydantic import BaseModel

    from waystation.kinds.batch.activities.spec import BatchJobSpec
    from waystation.kinds.batch.models import BatchProgress, BatchRunInput, BatchRunResult
    from waystation.sdk import DecisionInput, EventWrite, GateOutcome, GateSpec, RunLife
    from waystation.sdk.writes import ReadModelWrite


class BatchHost(Protocol):
    """The batch job as its parts see it."""

    # Why the job must stop early, (stop reason, message), the first reason found; None
    # while it may go on.
    stop: tuple[str, str] | None

    @property
    def arg(self) -> BatchRunInput: ...

    @property
    def spec(self) -> BatchJobSpec: ...

    @property
    def counts(self) -> BatchProgress: ...

    @property
    def life(self) -> RunLife: ...

    def event(self, key: str, type: str, **fields: Any) -> EventWrite: ...

    def stage(self, *, events: list[EventWrite] | None = None, snapshot: str | None = None,
              with_state: bool = False) -> None: ...

    def show(self, details: str) -> None: ...

    def progress_pct(self) -> int: ...

    def prelude(self) -> ReadModelWrite | None: ...

    def take_decided(self, checkpoint: str) -> DecisionInput | None: ...

    def result(self, status: str) -> BatchRunResult: ...

    async def ask_human(self, make_spec: Callable[[], GateSpec], *, where: str,
                        decided: DecisionInput | None = None) -> GateOutcome: ...

    async def fail(self, message: str, *, stop_reason: str,
                   result: BaseModel | None = None) -> NoReturn: ...
