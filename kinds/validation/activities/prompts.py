"""The validation crew's task prompts: Markdown files a user can edit, one per task.

They ship as package data under `kinds/validation/prompts/validation/<task>.md`; with
`WAYSTATION_PROMPTS_DIR` set, a `validation/<task>.md` there wins, so a deployment can
tune its prompts without touching the code.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

PACKAGED = Path(__file__).resolve().parent.parent / "prompts"


@lru_cache(maxsize=64)
def task_prompt(task: str, kind: str = "validation") -> str | None:
    """The system prompt of `task`, or None when it has none."""
    for base in (os.environ.get("WAYSTATION_PROMPTS_DIR"), PACKAGED):
        if base and (path := Path(base) / kind / f"{task}.md").is_file():
            return path.read_text()
    return None
