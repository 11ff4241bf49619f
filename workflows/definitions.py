"""The one place that reads Temporal's private definition API (`workflow._Definition`,
`activity._Definition`).

The SDK offers no public way to ask a `@workflow.defn` class its workflow type or its run
argument's type, or an `@activity.defn` function its name, and a custom `WorkflowRunner` is
handed the private definition. Should the SDK rename it, this module is the only one to change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity, workflow

WorkflowDefinition = workflow._Definition


def is_workflow_class(cls: type) -> bool:
    return workflow._Definition.from_class(cls) is not None


def workflow_type(cls: type) -> str:
    """The registered workflow type of a `@workflow.defn` class (never a dynamic one)."""
    name = workflow._Definition.must_from_class(cls).name
    assert name is not None, "a registered workflow is never dynamic"
    return name


def workflow_arg_type(cls: type) -> Any | None:
    """The annotated type of the run method's first argument, if any."""
    types = workflow._Definition.must_from_class(cls).arg_types
    return types[0] if types else None


def activity_name(function: Callable[..., Any]) -> str:
    return activity._Definition.must_from_callable(function).name or ""
