"""Submit-time refusal of a batch job's `items_path` outside what the operator allows."""

from __future__ import annotations

from pydantic import BaseModel

from waystation.kinds.batch.activities.items_source import SourceRefused, items_sources
from waystation.sdk import ApiError, Settings


def check_items_source(run_input: BaseModel, settings: Settings) -> None:
    """422 naming `input.items_path` when the run reads items from a refused source."""
    source = getattr(run_input, "items_path", None)
    if source is None:
        return
    try:
        items_sources(settings).check(source)
    except SourceRefused as refused:
        raise ApiError(422, "invalid_request", f"input.items_path: {refused}",
                       details=[{"loc": ["body", "input", "items_path"], "msg": str(refused),
                                 "type": "items_source_refused"}]) from None
