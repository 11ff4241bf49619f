"""A plug-in's tests: the whole stack started locally on free ports (`local_stack`), a check
retried until it holds, a response's server-sent events, and the registry of the installed
kinds (whose workflows `waystation.sdk.replay_histories` replays).
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.registry import load_registry
    from waystation.testing import LocalStack, eventually, local_stack, sse_events

__all__ = ["LocalStack", "eventually", "load_registry", "local_stack", "sse_events"]
