"""Writing the read model from a kind's activities: one `ReadModelWrite` applied in one
transaction (idempotent by its keys), writes merged into one, events appended, a run's state;
retrying while the database is unavailable; and the read-model activities a kind's own
activity may call directly.
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.activities.read_model import ReadModelActivities
    from waystation.contracts.writes import ReadModelWrite, RunStateWrite, merge_writes
    from waystation.persistence.db import UNAVAILABLE_ERRORS, retry_while_unavailable
    from waystation.persistence.events import append_events
    from waystation.persistence.writes import apply_write

__all__ = [
    "UNAVAILABLE_ERRORS", "ReadModelActivities", "ReadModelWrite", "RunStateWrite",
    "append_events", "apply_write", "merge_writes", "retry_while_unavailable",
]
