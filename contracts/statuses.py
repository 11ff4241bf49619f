"""The statuses a run and a decision request move through (seeds 000 and 001)."""

from __future__ import annotations

from typing import Literal

RunStatus = Literal["pending", "running", "paused", "completed", "failed", "canceled"]
GateStatus = Literal["pending", "approved", "rejected", "expired", "superseded"]
ExpiryPolicy = Literal["pause", "fail", "default"]
TERMINAL_RUN_STATUSES: tuple[RunStatus, ...] = ("completed", "failed", "canceled")

# Why a run stopped (`runs.stop_reason`). Every kind may name its own reasons (the mobile
# explorer's `max_steps` or `goal_reached`); these are the ones the shared lifecycle uses.
STOP_COMPLETED = "completed"
STOP_CANCELED = "canceled"
STOP_ACTIVITY_FAILED = "activity_failed"
