"""What an OpenAI Agents SDK agent registered as a Waystation agent imports (docs/agents.md,
"OpenAI Agents SDK").

- `needs_approval(tool)`: the tool with `needs_approval=True`: each call stops the run at a
  Waystation gate (approve, reject with feedback the model reads, or edit the arguments).
- `configured_model(own)`: the agent's model: the worker's configured OpenAI-compatible
  endpoint, else `own` (an offline `agents.Model`, say).
- `local_activity_as_tool(fn, ...)`: the local-activity counterpart of the integration's
  `activity_as_tool`: a fast, idempotent activity whose calls in a run are Temporal local
  activities (no server round trip; docs/agents.md, "Fast tools as local activities").
- `MODEL_RETRY`, `SUMMARY_REQUEST`: as for a PydanticAI agent (waystation.kinds.agent.sdk).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from datetime import timedelta
from typing import Any

from agents import FunctionTool, RunContextWrapper
from agents.function_schema import function_schema
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from waystation.kinds.agent.activities.local_tools import LOCAL_TOOL_RETRY, LOCAL_TOOL_TIMEOUT
from waystation.kinds.agent.activities.model import MODEL_RETRY
from waystation.kinds.agent.activities.openai import configured_model
from waystation.kinds.agent.contracts import SUMMARY_REQUEST


def needs_approval(tool: Any) -> FunctionTool:
    """`tool` (a `FunctionTool`: `@function_tool`, `activity_as_tool(...)`), each call of which
    waits for a person's approval (a Waystation gate)."""
    if not isinstance(tool, FunctionTool):
        raise TypeError(f"needs_approval takes a FunctionTool, not a {type(tool).__qualname__}")
    return dataclasses.replace(tool, needs_approval=True)


def local_activity_as_tool(fn: Any, *,
                           start_to_close_timeout: timedelta = LOCAL_TOOL_TIMEOUT,
                           retry_policy: RetryPolicy = LOCAL_TOOL_RETRY,
                           summary: str | None = None,
                           strict_json_schema: bool = True) -> FunctionTool:
    """`fn` (an `@activity.defn` function, taking plain arguments) as a tool whose calls in a
    run are Temporal local activities, run by the workflow's own worker: for fast, idempotent
    work (a worker dying during a call runs it again). The worker registers the activity as
    it does `activity_as_tool`'s. Outside a workflow the tool calls `fn` directly."""
    definition = activity._Definition.from_callable(fn)
    if definition is None or definition.name is None:
        raise TypeError("local_activity_as_tool takes a function decorated @activity.defn")
    name: str = definition.name
    schema = function_schema(fn)
    if schema.takes_context:
        raise TypeError(f"local tool {schema.name}: a local activity takes plain arguments")

    async def run_local_activity(ctx: RunContextWrapper[Any], input: str) -> Any:
        args, _ = schema.to_call_args(schema.params_pydantic_model(**json.loads(input)))
        if not workflow.in_workflow():
            called = definition.fn(*args)
            return str(await called if inspect.isawaitable(called) else called)
        result = await workflow.execute_local_activity(
            name, args=args, start_to_close_timeout=start_to_close_timeout,
            retry_policy=retry_policy,
            summary=summary or f"call tool: {schema.name} (local)")
        return str(result)

    return FunctionTool(name=schema.name, description=schema.description or "",
                        params_json_schema=schema.params_json_schema,
                        on_invoke_tool=run_local_activity, strict_json_schema=strict_json_schema)


__all__ = ["MODEL_RETRY", "SUMMARY_REQUEST", "configured_model", "local_activity_as_tool",
           "needs_approval"]
