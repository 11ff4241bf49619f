"""Fast tools as Temporal local activities, by the agent author's choice (issue 31).

`TemporalDurability` runs each tool call of a PydanticAI agent as a regular activity: the
dev server's floor for one is about 50 ms (two round trips and a workflow task). A tool that is
fast and local (a lookup in memory, a pure computation, a read of a nearby cache) can say so:

    from waystation.kinds.agent.sdk import local_tool

    Agent(..., tools=[local_tool(search_vendors), Tool(book_vendor, requires_approval=True)],
          capabilities=[TemporalDurability(...)])

Inside a run its calls are local activities: run by the worker that runs the workflow, with
no server round trip before or after, their result recorded in the history (a marker) with
the workflow task that follows, so a completed call is not run again on replay and a failed
one is retried by `retry_policy`. A worker that dies during a call runs it again (as it would
a regular activity whose heartbeat it missed): a local tool must be idempotent, and short
(at most `start_to_close_timeout`, 10 s by default; longer work belongs in a regular one).
Outside a workflow (tests, the in-process baseline) the function is simply called.

A local tool takes plain arguments (no `RunContext`) and must be `async`; `requires_approval`
and the other `Tool` options work as usual: a tool that needs approval is called, as a local
activity, only after its gate is approved.

How it plugs in without copying PydanticAI: the tool's `metadata["temporal"]` is `False`
inside a run (PydanticAI's documented opt-out: the tool is called in the workflow), and the
function it calls there starts the local activity. Runs whose histories predate local tools
replay their calls as the regular activities they were (`LOCAL_TOOLS_PATCH`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from pydantic import validate_call
from pydantic_ai import FunctionToolset, Tool
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.exceptions import UserError
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

# Runs that called a local tool's function as a regular activity (before local tools) replay so.
LOCAL_TOOLS_PATCH = "agent-local-tools"
LOCAL_TOOL_TIMEOUT = timedelta(seconds=10)
# A lookup that fails is retried quickly, a few times; then the tool call fails as a regular
# activity's would (PydanticAI tells the run).
LOCAL_TOOL_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=100),
                               maximum_interval=timedelta(seconds=2), maximum_attempts=5)
_ACTIVITY = "__waystation_local_activity__"


class _LocalInRuns(dict[str, Any]):
    """The tool's metadata: `temporal` is False (called in the workflow, which starts the local
    activity) in runs that use local tools, and the regular activity's config in runs whose
    history predates them. Asked by PydanticAI right before each call, in the workflow."""

    def get(self, key: str, default: Any = None) -> Any:
        if key == "temporal" and workflow.in_workflow() and workflow.patched(LOCAL_TOOLS_PATCH):
            return False
        return super().get(key, default)


def local_tool(function: Callable[..., Awaitable[Any]], *,
               start_to_close_timeout: timedelta = LOCAL_TOOL_TIMEOUT,
               retry_policy: RetryPolicy = LOCAL_TOOL_RETRY, name: str | None = None,
               activity_name: str | None = None, **tool_options: Any) -> Tool[Any]:
    """A PydanticAI `Tool` of `function` whose calls in a run are local activities.

    `activity_name`: the local activity's name, recorded in each run's history; by default
    `local_tool__<module>.<qualname>` of `function`. Pin it to the old one when the function
    moves to another module, so runs recorded before the move still replay.
    `tool_options` are `Tool`'s own (`requires_approval`, `description`, `max_retries`, ...).
    """
    if not inspect.iscoroutinefunction(function):
        raise UserError(f"local tool {function.__qualname__}: make the function async "
                        "(it is called in the workflow, which starts the local activity)")
    tool_name = name or function.__name__
    if Tool(function).takes_ctx:
        raise UserError(f"local tool {tool_name}: a local tool takes plain arguments, not a "
                        "RunContext (make it a regular Tool)")
    signature = inspect.signature(function)
    checked = validate_call(function)

    @activity.defn(name=activity_name
                   or f"local_tool__{function.__module__}.{function.__qualname__}")
    async def run_tool(arguments: dict[str, Any]) -> Any:
        # The arguments come back as JSON: validated again into the function's types.
        return await checked(**arguments)

    @functools.wraps(function)
    async def call(*args: Any, **kwargs: Any) -> Any:
        if not workflow.in_workflow():
            # Outside a run, or inside the regular activity of a run from before local tools.
            return await function(*args, **kwargs)
        arguments = signature.bind(*args, **kwargs).arguments
        return await workflow.execute_local_activity(
            run_tool, arguments, start_to_close_timeout=start_to_close_timeout,
            retry_policy=retry_policy, summary=f"call tool: {tool_name} (local)")

    setattr(call, _ACTIVITY, run_tool)
    metadata = _LocalInRuns(tool_options.pop("metadata", None) or {})
    return Tool(call, name=name, metadata=metadata, **tool_options)


def local_tool_activities(agent: AbstractAgent[Any, Any]) -> list[Callable[..., Any]]:
    """The local activities of an agent's local tools, for the worker."""
    found = []
    for toolset in agent.toolsets:
        inner = getattr(toolset, "wrapped", toolset)
        if isinstance(inner, FunctionToolset):
            for tool in inner.tools.values():
                run_tool = getattr(tool.function, _ACTIVITY, None)
                if run_tool is not None:
                    found.append(run_tool)
    return found
