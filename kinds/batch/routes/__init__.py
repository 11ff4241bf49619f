"""The batch kind's API routes: `/jobs` and `/items`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from waystation.kinds.batch.activities.spec import STEP_NAME

# A batch step's name in a path (`/items/{id}/outputs/{step}`, `/jobs/{id}/steps/{step}/...`).
StepName = Annotated[str, Path(pattern=STEP_NAME)]
