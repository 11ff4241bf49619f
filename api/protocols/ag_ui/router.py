"""`POST /ag-ui/{kind}`: an AG-UI 1.0 frontend (CopilotKit, `@ag-ui/client`'s HttpAgent) drives
a run of any kind; docs/ag-ui.md has the mapping, the ids and the three lines a client needs.

The thread is the run (`threadId` is the run id); each POST is one AG-UI run. Everything it does
goes through the service layer, as the REST routes do: starting a run, deciding a request and
sending a message are `api/services` calls, with the same checks, rules and audit.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar
from uuid import UUID

import asyncpg
from ag_ui.core import Context, Message, ResumeEntry, RunAgentInput, TextPart, Tool, UserMessage
from fastapi import APIRouter, Header, Path, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, ValidationError, field_validator
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.deps import (
    Conn,
    CurrentUser,
    RegistryDep,
    SettingsDep,
    TemporalClient,
    still_reads_run,
)
from waystation.api.errors import ApiError, invalid_request
from waystation.api.protocols.ag_ui.mapping import MESSAGE_ID_PREFIX, Position
from waystation.api.protocols.ag_ui.stream import ThreadStream
from waystation.api.schemas import DecisionRequest, DecisionView, MessageRequest, run_create_model
from waystation.api.services import decisions as decisions_service
from waystation.api.services import messages as messages_service
from waystation.api.services import runs as runs_service
from waystation.api.services.access import claims_of
from waystation.api.sse import STREAM_HEADERS
from waystation.persistence.models import RunRow
from waystation.registry import Registry
from waystation.settings import Settings

router = APIRouter(tags=["ag-ui"])
M = TypeVar("M", bound=BaseModel)

# What a new thread's `forwardedProps` may carry besides `input`: the fields of `POST /runs`.
START_FIELDS = ("project_id", "group_id", "gates")
# A kind whose input takes a first message (the agent kind's `message`) gets a new thread's
# first user message there when `forwardedProps.input` gives none, as a chat frontend sends it.
FIRST_MESSAGE = "message"
# The option a `cancelled` resume entry takes when its payload names none (a gate's default
# rejecting option; a gate that rejects by another name takes `{"decision": ...}`).
REJECT = "reject"
AG_UI_RESPONSES: dict[int | str, dict[str, Any]] = {200: {
    "content": {"text/event-stream": {}},
    "description": "AG-UI 1.0 events; each SSE `id` is the run event's `seq` (or `seq.n`)."}}

# Every list an input carries is bounded, so that one request cannot make a thousand writes:
# a larger one is a 422 before anything is done (issue 38). A run waits on a handful of
# requests at once; a conversation sent whole is longer.
MAX_RESUME_ENTRIES = 50
MAX_MESSAGES = 1000
MAX_TOOLS = 100
MAX_CONTEXT_ENTRIES = 100


class BoundedRunAgentInput(RunAgentInput):
    """AG-UI's `RunAgentInput` with a bound on each list."""

    messages: list[Message] = Field(max_length=MAX_MESSAGES)
    tools: list[Tool] | None = Field(None, max_length=MAX_TOOLS)
    context: list[Context] | None = Field(None, max_length=MAX_CONTEXT_ENTRIES)
    resume: list[ResumeEntry] | None = Field(None, max_length=MAX_RESUME_ENTRIES)

    @field_validator("resume")
    @classmethod
    def _each_interrupt_once(cls, resume: list[ResumeEntry] | None
                             ) -> list[ResumeEntry] | None:
        ids = [entry.interrupt_id for entry in resume or ()]
        if len(set(ids)) != len(ids):
            raise ValueError("each interrupt may be answered once: an interruptId repeats")
        return resume


Kind = Annotated[str, Path(min_length=1, max_length=50)]
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=40)]


@router.post("/ag-ui/{kind}", response_class=StreamingResponse, responses=AG_UI_RESPONSES)
async def run_ag_ui(kind: Kind, body: BoundedRunAgentInput, request: Request, user: CurrentUser,
                    conn: Conn, temporal: TemporalClient, registry: RegistryDep,
                    settings: SettingsDep,
                    last_event_id: LastEventId = None) -> StreamingResponse:
    """One AG-UI run of thread `threadId`, a run of `kind` (a fresh UUID with
    `forwardedProps.input` starts one): applies the input's `resume` entries or its new user
    message, then streams AG-UI events until the run waits for a person or ends."""
    if kind not in registry.kinds:
        raise ApiError(404, "kind_not_found",
                       f"no run kind {kind!r}; one of {', '.join(registry.names)}")
    resumed_at = _resume_point(last_event_id)
    run, created = await _thread(conn, temporal, user, kind, body, registry=registry,
                                 settings=settings)
    # A thread started here is streamed from its first event, whatever its workflow has
    # written meanwhile.
    start = Position(0) if created else Position(run.last_seq)
    stream = ThreadStream(pool=request.app.state.pool, claims=claims_of(user), user=user,
                          registry=registry, run=run, thread_id=body.thread_id, run_id=body.run_id,
                          position=resumed_at or start,
                          may_still_read=lambda: still_reads_run(request, user, run.id))
    # A reconnection only reads on: what its request asked was done by the request it
    # continues.
    if resumed_at is None:
        await stream.open(conn)
        if not created:
            stream.refusal = await _act(conn, temporal, user, run, body, registry)
    return StreamingResponse(
        stream.frames(request.app.state.event_hub, settings.sse_heartbeat_seconds),
        media_type="text/event-stream", headers=STREAM_HEADERS)


def _resume_point(last_event_id: str | None) -> Position | None:
    if last_event_id is None:
        return None
    try:
        return Position.parse(last_event_id)
    except ValueError as error:
        raise ApiError(422, "invalid_request", str(error)) from error


async def _thread(conn: asyncpg.Connection, temporal: Client, user: User, kind: str,
                  body: RunAgentInput, *, registry: Registry,
                  settings: Settings) -> tuple[RunRow, bool]:
    """The thread's run, and whether this request started it: an existing thread is a run
    the caller may read; a fresh one is started when `forwardedProps.input` is given."""
    try:
        run_id = UUID(body.thread_id)
    except ValueError as error:
        raise ApiError(404, "run_not_found", f"thread {body.thread_id!r} not found: a thread "
                                             "id is a run id (a UUID)") from error
    props = body.forwarded_props if isinstance(body.forwarded_props, dict) else {}
    created = False
    try:
        run = await runs_service.visible_run(conn, user, run_id)
    except ApiError as missing:
        if missing.status != 404 or "input" not in props:
            raise
        start = _run_create(kind, props, body, registry)
        await runs_service.start_run(conn, temporal, user, start, registry=registry,
                                     settings=settings, run_id=run_id)
        run, created = await runs_service.visible_run(conn, user, run_id), True
    if run.kind != kind:
        raise ApiError(404, "run_not_found", f"run {run_id} is not a {kind} run")
    return run, created


def _run_create(kind: str, props: dict[str, Any], body: RunAgentInput,
                registry: Registry) -> Any:
    """`forwardedProps` as the `POST /runs` body it stands for, checked as that body is."""
    fields = {name: props[name] for name in START_FIELDS if name in props}
    run_input, first = props["input"], _new_message(body)
    if (isinstance(run_input, dict) and first is not None and not run_input.get(FIRST_MESSAGE)
            and FIRST_MESSAGE in registry.kind(kind).input_model.model_fields):
        run_input = {**run_input, FIRST_MESSAGE: first[1]}
    try:
        return run_create_model([registry.kind(kind)]).model_validate(
            {"kind": kind, "input": run_input, **fields})
    except ValidationError as error:
        raise invalid_request([{**e, "loc": ("body", "forwardedProps", *e["loc"])}
                               for e in error.errors()]) from error


async def _act(conn: asyncpg.Connection, temporal: Client, user: User, run: RunRow,
               body: RunAgentInput, registry: Registry) -> ApiError | None:
    """Applies the input's `resume` entries, else its new user message; the refusal, as the
    REST API would answer it, if there is one."""
    try:
        if body.resume:
            await _resume(conn, temporal, user, run, body.resume, body.run_id)
        elif (text := _new_message(body)) is not None:
            message, content = text
            await messages_service.send_message(
                conn, temporal, user, run, _checked(MessageRequest, {"text": content}),
                registry=registry, idempotency_key=f"ag-ui-{message}")
    except ApiError as refusal:
        return refusal
    return None


async def _resume(conn: asyncpg.Connection, temporal: Client, user: User, run: RunRow,
                  entries: list[ResumeEntry], ag_ui_run_id: str) -> None:
    """Decides each entry's request through the service, in order. Every entry is checked
    first, so one naming an unknown request or carrying an invalid payload writes nothing."""
    requests = {str(r.request_id): r
                for r in (await decisions_service.run_decisions(conn, run)).decisions}
    decisions: list[tuple[DecisionView, DecisionRequest]] = []
    for entry in entries:
        view = requests.get(entry.interrupt_id)
        if view is None:
            raise ApiError(404, "interrupt_not_found",
                           f"run {run.id} has no request {entry.interrupt_id!r}")
        decisions.append((view, _decision(entry, view)))
    for view, decision in decisions:
        # The AG-UI run id keys the vote: the same request sent again is applied once.
        await decisions_service.decide(conn, temporal, user, run, view.checkpoint_name,
                                       decision, idempotency_key=f"ag-ui-{ag_ui_run_id}")


def _decision(entry: ResumeEntry, view: DecisionView) -> DecisionRequest:
    """The entry's payload as the body `POST /runs/{id}/decisions/{checkpoint}` takes, for the
    request the interrupt is (a later request of the checkpoint is refused as stale)."""
    payload = entry.payload if entry.payload is not None else {}
    if not isinstance(payload, dict):
        raise ApiError(422, "invalid_request", "a resume payload is the decision body: "
                                               '{"decision", "feedback"?, "answer"?, "digest"?}')
    if entry.status == "cancelled":
        payload = {"decision": REJECT, **payload}
    return _checked(DecisionRequest, {**payload, "request_id": str(view.request_id)})


def _checked(model: type[M], data: dict[str, Any]) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise invalid_request(error.errors()) from error


def _new_message(body: RunAgentInput) -> tuple[str, str] | None:
    """The client's last message (id, text) when it is a user message the thread does not
    have yet: the ones it has carry their run event's id (`ws-<seq>`)."""
    if not body.messages:
        return None
    last = body.messages[-1]
    if not isinstance(last, UserMessage) or last.id.startswith(MESSAGE_ID_PREFIX):
        return None
    content = last.content
    if isinstance(content, str):
        return last.id, content
    return last.id, "\n".join(part.text for part in content if isinstance(part, TextPart))
