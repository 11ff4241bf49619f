"""What a kind's FastAPI routes take and return: the API's dependencies (a claimed connection,
the caller, the idempotency key, the registry, settings, Temporal, a run the caller may see),
the API's schemas a kind's routes share, and the headers of a page framed by the console.
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.api.deps import (
        Conn,
        CurrentUser,
        IdempotencyKey,
        RegistryDep,
        SettingsDep,
        TemporalClient,
        VisibleRun,
    )
    from waystation.api.queries import TranscriptQuery
    from waystation.api.schemas import (
        MessageAccepted,
        MessagePage,
        MessageRequest,
        RunCreated,
        RunView,
        TranscriptEntry,
    )
    from waystation.api.security_headers import SAME_ORIGIN_FRAME_HEADERS

__all__ = [
    "SAME_ORIGIN_FRAME_HEADERS", "Conn", "CurrentUser", "IdempotencyKey", "MessageAccepted",
    "MessagePage", "MessageRequest", "RegistryDep", "RunCreated", "RunView", "SettingsDep",
    "TemporalClient", "TranscriptEntry", "TranscriptQuery", "VisibleRun",
]
