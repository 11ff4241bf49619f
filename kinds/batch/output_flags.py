"""A flag an output check puts on a stored step output (activities/checks.py)."""

from __future__ import annotations

from pydantic import BaseModel


class OutputFlag(BaseModel):
    check: str
    step: str
    reason: str
    found: list[str]
