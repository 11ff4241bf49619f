"""MCP tools and resources onto the service layer: each tool is a REST route of the same
meaning, calling the same `waystation.api.services` function with the same arguments (`run_id`,
`kind`, `input`, `checkpoint`, `decision`, ...) and answering the same view (`RunView`,
`DecisionView`, ...).

A tool takes one pydantic model (its `inputSchema`) and returns one (its `outputSchema`, the
REST view). A refusal is the API's own `ApiError`, answered as a tool error (`isError: true`)
whose text is the REST error body, `{"error": {"code", "message", "details"?}}`: a run the
caller may not see is `run_not_found`, exactly as `GET /runs/{id}` answers it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg
import pydantic_core
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from starlette.requests import Request
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.deps import get_registry, get_settings, get_temporal, pooled_connection
from waystation.api.errors import ApiError, escaped_error, invalid_request
from waystation.api.protocols.mcp.arguments import (
    Arguments,
    DecideArguments,
    ForkRunArguments,
    ListRunsArguments,
    NoArguments,
    PendingDecisionsArguments,
    ReadEventsArguments,
    RunRef,
    SendMessageArguments,
    StartRunArguments,
)
from waystation.api.queries import InboxQuery, RunFilter, run_filter_model
from waystation.api.schemas import (
    CancelAccepted,
    DecisionList,
    DecisionView,
    EventPage,
    MessageAccepted,
    RunCreated,
    RunPage,
    RunView,
    run_create_model,
)
from waystation.api.services import decisions, events, fork, messages, runs
from waystation.api.services.access import claims_of
from waystation.registry import Registry
from waystation.settings import Settings

# Where the endpoint puts the authenticated caller in the ASGI scope, for the handlers.
USER_SCOPE_KEY = "waystation.user"


@dataclass(frozen=True)
class Caller:
    """Who calls, and the app's shared clients, from the HTTP request the message came in."""

    user: User
    request: Request

    @classmethod
    def of(cls, request: Request | None) -> Caller:
        assert request is not None, "Waystation serves MCP over HTTP only"
        return cls(user=request.scope[USER_SCOPE_KEY], request=request)

    @property
    def registry(self) -> Registry:
        return get_registry(self.request)

    @property
    def settings(self) -> Settings:
        return get_settings(self.request)

    def conn(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection whose queries run for the caller (row-level security)."""
        return pooled_connection(self.request, claims_of(self.user))

    async def temporal(self) -> Client:
        return await get_temporal(self.request)


class RunKindView(BaseModel):
    kind: str
    description: str
    input_schema: dict[str, Any] = Field(description="The JSON Schema of start_run's `input`.")


class RunKindList(BaseModel):
    kinds: list[RunKindView]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its arguments' model, its result's model (a REST view) and what it does."""

    name: str
    description: str
    arguments: type[Arguments]
    result: Any  # a view model, or a union of them
    run: Callable[[Caller, Any], Awaitable[BaseModel]]
    read_only: bool = True


async def list_run_kinds(caller: Caller, _: NoArguments) -> RunKindList:
    return RunKindList(kinds=[
        RunKindView(kind=name, description=registered.kind.description,
                    input_schema=registered.kind.input_model.model_json_schema())
        for name, registered in caller.registry.kinds.items()])


async def start_run(caller: Caller, args: StartRunArguments, *,
                    run_create: TypeAdapter[Any]) -> RunCreated:
    try:  # the body POST /runs takes, refused alike
        request = run_create.validate_python(
            args.model_dump(exclude={"idempotency_key"}, exclude_none=True))
    except ValidationError as error:
        raise invalid_request(error.errors()) from error
    async with caller.conn() as conn:
        return await runs.start_run(conn, await caller.temporal(), caller.user, request,
                                    registry=caller.registry, settings=caller.settings,
                                    idempotency_key=args.idempotency_key)


async def get_run(caller: Caller, args: RunRef) -> RunView:
    async with caller.conn() as conn:
        return await runs.run_view(conn, await runs.visible_run(conn, caller.user, args.run_id),
                                   registry=caller.registry)


async def list_runs(caller: Caller, args: ListRunsArguments) -> RunPage:
    async with caller.conn() as conn:
        return await runs.list_runs(conn, caller.user, args, registry=caller.registry)


async def read_events(caller: Caller, args: ReadEventsArguments) -> EventPage:
    async with caller.conn() as conn:
        run = await runs.visible_run(conn, caller.user, args.run_id)
        return await events.list_events(conn, run, args)


async def list_pending_decisions(caller: Caller, args: PendingDecisionsArguments
                                 ) -> DecisionList:
    async with caller.conn() as conn:
        return await decisions.inbox(conn, caller.user,
                                     InboxQuery(status="pending", limit=args.limit))


async def decide(caller: Caller, args: DecideArguments) -> DecisionView:
    async with caller.conn() as conn:
        run = await runs.visible_run(conn, caller.user, args.run_id)
        return await decisions.decide(conn, await caller.temporal(), caller.user, run,
                                      args.checkpoint, args,
                                      idempotency_key=args.idempotency_key)


async def send_message(caller: Caller, args: SendMessageArguments) -> MessageAccepted:
    async with caller.conn() as conn:
        run = await runs.visible_run(conn, caller.user, args.run_id)
        return await messages.send_message(conn, await caller.temporal(), caller.user, run,
                                           args, registry=caller.registry,
                                           idempotency_key=args.idempotency_key)


async def cancel_run(caller: Caller, args: RunRef) -> CancelAccepted:
    async with caller.conn() as conn:
        run = await runs.visible_run(conn, caller.user, args.run_id)
        return await runs.cancel_run(conn, await caller.temporal(), caller.user, run)


async def fork_run(caller: Caller, args: ForkRunArguments) -> RunCreated:
    async with caller.conn() as conn:
        source = await runs.visible_run(conn, caller.user, args.run_id)
        return await fork.fork_run(conn, await caller.temporal(), caller.user, source, args,
                                   registry=caller.registry, settings=caller.settings,
                                   idempotency_key=args.idempotency_key)


def tool_specs(run_create: TypeAdapter[Any],
               list_arguments: type[ListRunsArguments]) -> list[ToolSpec]:
    """Every tool, as a model reads it; `run_create` is the body POST /runs takes,
    `list_arguments` list_runs' arguments with the kinds' own filters (`ApiHooks.run_filters`)."""
    return [
        ToolSpec("list_run_kinds", "The kinds of run Waystation can start, each with the JSON "
                 "Schema of its `input`. Call it before start_run.",
                 NoArguments, RunKindList, list_run_kinds),
        ToolSpec("start_run", "Start a durable run of a registered `kind` with its `input` "
                 "(as POST /runs). A run works on its own for minutes to weeks and stops at "
                 "human decisions (gates): follow it with get_run or read_events, answer its gates "
                 "with decide. Returns the new `run_id` (RunCreated). A client declaring the MCP "
                 "tasks extension gets a task that follows the run instead, whose result is the "
                 "finished run (RunView, as get_run).",
                 StartRunArguments, RunCreated | RunView,
                 functools.partial(start_run, run_create=run_create), read_only=False),
        ToolSpec("get_run", "One run: its status (pending, running, paused, completed, failed, "
                 "canceled), phase, result, and the decision it waits for (`pending_decision`: "
                 "`checkpoint_name`, options, recommendation, `digest`), if any.",
                 RunRef, RunView, get_run),
        ToolSpec("list_runs", "Your runs and your groups' runs, newest first; filter by `kind`, "
                 "`status`, `awaiting_human`, `project_id`, `group_id`, text `q` or a kind's "
                 "own filter; pass `next_cursor` back as `cursor` to read on.",
                 list_arguments, RunPage, list_runs),
        ToolSpec("read_events", "A run's progress events in order (phases, tasks, gates, the "
                 "final `run.completed` / `run.failed` / `run.canceled`); pass `next_after_seq` "
                 "back as `after_seq` to read only what is new.",
                 ReadEventsArguments, EventPage, read_events),
        ToolSpec("list_pending_decisions", "The decisions waiting for you: each with its "
                 "`run_id`, `checkpoint_name`, title, description, evidence (`context`), options "
                 "and `recommended_option`, and the `digest` of what you read. Answer one with "
                 "decide.",
                 PendingDecisionsArguments, DecisionList, list_pending_decisions),
        ToolSpec("decide", "Answer a pending decision of a run: `checkpoint` (its "
                 "`checkpoint_name`), `decision` (one of its options' values), optional "
                 "`feedback`, `answer` (the typed answer an option takes, valid against the "
                 "request's `answer_schema`) and `digest` / `request_id` of what you reviewed "
                 "(a stale one is refused). Returns the request, still pending while it waits "
                 "for a quorum.",
                 DecideArguments, DecisionView, decide, read_only=False),
        ToolSpec("send_message", "The next message of a run's conversation (`text`); "
                 "refused (`not_waiting_for_message`) unless the run waits for one.",
                 SendMessageArguments, MessageAccepted, send_message, read_only=False),
        ToolSpec("cancel_run", "Ask a run to stop; it records `canceled` once its workflow has "
                 "wound down (get_run).",
                 RunRef, CancelAccepted, cancel_run, read_only=False),
        ToolSpec("fork_run", "Start a new run of the same kind from one of a run's "
                 "snapshots (as POST /runs/{id}/fork): `from` is `{\"snapshot\": <ordinal>}` or "
                 "`{\"checkpoint\": \"<gate>\"}`; an optional `decision` (as decide takes it) is "
                 "applied first to that gate, amending a past decision; `input` replaces fields "
                 "of the source's input. The source is untouched. Refused "
                 "(`fork_not_supported`) for a kind that cannot fork, with the reason.",
                 ForkRunArguments, RunCreated, fork_run, read_only=False),
    ]


class Tools:
    """The tools over the app's run kinds, their schemas built once (pydantic takes
    milliseconds for each, and ~20 for the union of every kind's start body)."""

    def __init__(self, registry: Registry) -> None:
        run_create = TypeAdapter(run_create_model(
            [registered.kind for registered in registry.kinds.values()]))
        # The core's tools, then each kind's own (`ApiHooks.mcp_tools`).
        list_arguments = run_filter_model(registry.run_filters(), ListRunsArguments)
        self.specs = {spec.name: spec for spec in [*tool_specs(run_create, list_arguments),
                                                   *registry.mcp_tools()]}
        self.input_schemas = {name: spec.arguments.model_json_schema()
                              for name, spec in self.specs.items()}
        self.input_schemas["start_run"]["properties"]["kind"]["enum"] = registry.names
        self.listing = ListToolsResult(tools=[
            Tool(name=spec.name, description=spec.description,
                 input_schema=self.input_schemas[spec.name],
                 output_schema={"type": "object",  # MCP's root; a union of views is one too
                                **TypeAdapter(spec.result).json_schema(mode="serialization")},
                 annotations=ToolAnnotations(read_only_hint=spec.read_only,
                                             destructive_hint=spec.name == "cancel_run",
                                             open_world_hint=False))
            for spec in self.specs.values()])

    async def call(self, caller: Caller, name: str, arguments: dict[str, Any]
                   ) -> CallToolResult:
        """The tool's result, or a tool error carrying the API's error code."""
        spec = self.specs.get(name)
        if spec is None:  # a protocol error, as MCP answers an unknown tool
            raise protocol_error(ApiError(404, "unknown_tool", f"no tool {name!r}; one of "
                                                               f"{', '.join(self.specs)}"))
        try:
            args = spec.arguments.model_validate(arguments)
            return tool_result(await spec.run(caller, args))
        except ValidationError as error:
            return tool_error(invalid_request(error.errors()))
        except ApiError as error:
            return tool_error(error)
        except Exception as error:  # noqa: BLE001 - answered as the REST API answers it
            return tool_error(escaped_error(error, f"MCP tool {name}"))


def tool_result(view: BaseModel) -> CallToolResult:
    structured = view.model_dump(mode="json")
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(structured))],
                          structured_content=structured)


def error_body(error: ApiError) -> dict[str, Any]:
    """The REST API's error body for `error`."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.details is not None:
        body["details"] = error.details
    return {"error": body}


def tool_error(error: ApiError) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(error_body(error)))],
                          is_error=True)


def protocol_error(error: ApiError, **data: Any) -> MCPError:
    """A refusal where MCP has no tool error (an unknown tool, reading a resource, a task
    request): a JSON-RPC error carrying the REST error body; -32602 for what does not exist or
    the caller may not see, as MCP answers an unknown resource or task."""
    code = (INVALID_PARAMS if error.status in (404, 422)
            else INTERNAL_ERROR if error.status >= 500 else INVALID_REQUEST)
    return MCPError(code=code, message=error.message, data={**data, **error_body(error)})


@contextmanager
def protocol_errors(where: str, **data: Any) -> Iterator[None]:
    """Refusals, and what the REST API answers 503 or 500, raised as `protocol_error`s."""
    try:
        yield
    except ApiError as error:
        raise protocol_error(error, **data) from error
    except MCPError:
        raise
    except Exception as error:  # noqa: BLE001 - answered as the REST API answers it
        raise protocol_error(escaped_error(error, where), **data) from error


RUN_URI = "waystation://runs/{run_id}"
_RESOURCE = re.compile(r"^waystation://runs/(?P<run_id>[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})"
                       r"(?P<part>(/[a-z_]+)*)$", re.IGNORECASE)
_TEMPLATES = [
    ResourceTemplate(name="run", uri_template=RUN_URI, mime_type="application/json",
                     description="A run, as get_run answers it."),
    ResourceTemplate(name="latest_snapshot", uri_template=RUN_URI + "/snapshots/latest",
                     mime_type="application/json",
                     description="The run's newest full-state snapshot."),
]


def resource_templates(registry: Registry) -> ListResourceTemplatesResult:
    """The core's run resources, then the kinds' (`ApiHooks.mcp_run_resources`)."""
    return ListResourceTemplatesResult(resource_templates=[*_TEMPLATES, *(
        ResourceTemplate(name=r.name, uri_template=RUN_URI + r.part,
                         mime_type="application/json", description=r.description)
        for r in registry.mcp_run_resources())])


async def list_resources(caller: Caller) -> ListResourcesResult:
    """The caller's newest runs (the first page of list_runs)."""
    with protocol_errors("MCP resources/list"):
        async with caller.conn() as conn:
            page = await runs.list_runs(conn, caller.user, RunFilter(),
                                        registry=caller.registry)
    return ListResourcesResult(resources=[
        Resource(name=f"{run.kind} run {run.run_id}", uri=RUN_URI.format(run_id=run.run_id),
                 mime_type="application/json", description=f"{run.kind} run, {run.status}")
        for run in page.runs])


async def read_resource(caller: Caller, uri: str) -> ReadResourceResult:
    """A run, its latest snapshot or a kind's resource of it (a mobile run's screen graph), as
    JSON; JSON-RPC -32602 for a resource that does not exist or that the caller may not see."""
    found = _RESOURCE.match(uri)
    kinds = {r.part: r for r in caller.registry.mcp_run_resources()}
    with protocol_errors("MCP resources/read", uri=uri):
        if found is None or found["part"] not in ("", "/snapshots/latest", *kinds):
            raise ApiError(404, "resource_not_found", f"no resource {uri!r}; see "
                                                      "resources/templates/list")
        async with caller.conn() as conn:
            run = await runs.visible_run(conn, caller.user, UUID(found["run_id"]))
            content: Any
            if found["part"] == "/snapshots/latest":
                content = await events.latest_snapshot(conn, run)
            elif found["part"] in kinds:
                content = await kinds[found["part"]].read(conn, run)
            else:
                content = await runs.run_view(conn, run, registry=caller.registry)
    return ReadResourceResult(contents=[TextResourceContents(
        uri=uri, mime_type="application/json", text=pydantic_core.to_json(content).decode())])

