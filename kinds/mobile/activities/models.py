"""Inputs and results of the mobile step activity (shared by the workflow and the worker)."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from waystation.kinds.mobile.repository import ActionRecord, StepRecord
from waystation.sdk.writes import ReadModelWrite

DriverName = Literal["simulator", "adb"]
ActionKind = Literal["tap", "long_tap", "input", "scroll", "back", "launch"]


class ActionCommand(BaseModel):
    """What to do before observing: an action of the screen seen last, or a (re)launch."""

    kind: ActionKind
    action_id: int | None = None
    from_screen_id: int | None = None
    x: int = 0
    y: int = 0
    x2: int = 0
    y2: int = 0
    text: str | None = None
    label: str = ""


class ActionView(BaseModel):
    id: int
    selector: str
    kind: str
    label: str
    x: int
    y: int
    x2: int = 0
    y2: int = 0
    row_group: str | None = None
    row_index: int | None = None
    sensitive: bool = False


class ExploreStepInput(BaseModel):
    run_id: UUID
    session_id: str
    step: int
    app_package: str
    driver: DriverName = "simulator"
    device_serial: str | None = None
    command: ActionCommand
    input_text: str = "waystation"
    persist: bool = True
    # Staged writes of the workflow (the previous choice, the run state, a snapshot),
    # applied in this step's transaction.
    prelude: ReadModelWrite | None = None


class ExploreStepResult(BaseModel):
    step: int
    screen_id: int | None = None
    activity: str | None = None
    package: str | None = None
    in_app: bool = False
    new_screen: bool = False
    new_edge: bool = False
    transitional: bool = False
    actions: list[ActionView] = Field(default_factory=list)
    error: str | None = None


class ForkGraphInput(BaseModel):
    """A forked run (`run_id`) about to carry on from step `up_to_step` of `source_run_id`."""

    run_id: UUID
    source_run_id: UUID
    up_to_step: int


class ForkGraph(BaseModel):
    """The fork's recorded steps (its source's, copied) and their screens' actions."""

    steps: list[StepRecord]
    actions: list[ActionRecord]
