"""The API's service layer under a kind's own services: the caller (`User`), who may read,
start or decide a run, starting a run of a kind, a workflow Update with the API's one mapping
of its refusals, and an agent-like run's messages and transcript.
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.api.auth import User
    from waystation.api.run_kinds import create_and_start
    from waystation.api.services.access import may_read, require_decider, require_run_starter
    from waystation.api.services.messages import send_message, transcript
    from waystation.api.services.workflow_updates import execute_update

__all__ = [
    "User", "create_and_start", "execute_update", "may_read", "require_decider",
    "require_run_starter", "send_message", "transcript",
]
