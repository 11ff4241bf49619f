"""Checking a JSON Schema a user supplies (gate answers, a job's output), with the limits the
API puts on one; and the Android package pattern the API's run filters share with a kind.
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.contracts.apps import PACKAGE_PATTERN
    from waystation.contracts.user_schemas import check_user_schema

__all__ = ["PACKAGE_PATTERN", "check_user_schema"]
