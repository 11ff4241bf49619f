"""What a kind's workflow module uses besides `RunWorkflow` (import it inside
`workflow.unsafe.imports_passed_through()`): the search attributes every run sets, and the
refusal codes a kind's Update validators raise (part of recorded histories: never renamed).
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.contracts.refusals import JOB_NOT_RUNNING, NOT_WAITING_FOR_MESSAGE
    from waystation.workflows import search_attributes

__all__ = ["JOB_NOT_RUNNING", "NOT_WAITING_FOR_MESSAGE", "search_attributes"]
