"""Reading the read model: a kind's own SQL files (`queries_in` its queries folder), rows as
pydantic models (`Row`, `RunRow`, `Usd` for money), a run by id and a run's events.
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.persistence.events import list_events
    from waystation.persistence.models import Row, RunRow, Usd
    from waystation.persistence.queries import queries_in
    from waystation.persistence.runs import get_run

__all__ = ["Row", "RunRow", "Usd", "get_run", "list_events", "queries_in"]
