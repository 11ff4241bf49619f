"""How a Waystation run reads as an A2A task, and an A2A message as a Waystation request.

The run IS the task: the task's id (and its context id) is the run id, and its state is
derived, every time it is read, from the run's status and the request it waits for, so
nothing is stored twice and nothing can disagree. The functions here only translate; every
decision about what may happen is the service layer's.

| run                                                    | task state       |
| ------------------------------------------------------ | ---------------- |
| `pending`                                              | `submitted`      |
| `running`, or `paused` for another reason              | `working`        |
| waiting at a gate (a pending decision request)         | `input-required` |
| an agent run `paused`, waiting for its next message    | `input-required` |
| `completed`                                            | `completed`      |
| `failed` with `stop_reason` `rejected`                 | `rejected`       |
| `failed` otherwise                                     | `failed`         |
| `canceled`                                             | `canceled`       |
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from uuid import UUID

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, ValidationError

from waystation.api.decision_payload import payload_schema
from waystation.api.errors import ApiError, invalid_request
from waystation.api.schemas import (
    DecisionRequest,
    DecisionView,
    EventView,
    MessageDelta,
    RunView,
    TranscriptEntry,
)
from waystation.api.webhook_schemas import WebhookCreate, WebhookView
from waystation.contracts.events import WEBHOOK_EVENT_TYPES
from waystation.registry import Registry

# A new task's message names its run kind here; without it the message starts a run of the
# first registered kind whose runs take messages (`default_kind`).
KIND_KEY = "kind"
# What else a new task's message metadata may carry: `POST /runs`'s other fields.
START_KEYS = ("project_id", "group_id", "gates")
# The `type` in a data part's metadata that says what the part is.
PART_TYPE = "type"
DECISION_REQUEST = "decision_request"
RUN_RESULT = "run_result"
RUN_EVENT = "run_event"
JSON, TEXT = "application/json", "text/plain"

TERMINAL_STATES = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED,
                             TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED})
_FINISHED = {"completed": TaskState.TASK_STATE_COMPLETED,
             "failed": TaskState.TASK_STATE_FAILED,
             "canceled": TaskState.TASK_STATE_CANCELED}
# A run's own stop reason that makes a failed run a refused task.
REJECTED = "rejected"
# A push config's token is sent as a header value.
TOKEN_LIMIT = 512
_HEADER_SAFE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
# An HTTP authentication scheme is a `token` (RFC 9110, 11.1).
_AUTH_SCHEME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")


def default_kind(registry: Registry) -> str | None:
    """The kind a new task's message starts when it names none: the first registered kind
    whose runs take messages (`ApiHooks.messages`), which also takes a text part as its first
    message."""
    return next((name for name in registry.names if registry.messages(name) is not None), None)


def task_state(run: RunView, *, waiting: bool) -> TaskState:
    """`waiting`: the run waits for its next message (waystation.api.services.messages)."""
    if run.status in _FINISHED:
        if run.status == "failed" and run.stop_reason == REJECTED:
            return TaskState.TASK_STATE_REJECTED
        return _FINISHED[run.status]
    if run.status == "pending":
        return TaskState.TASK_STATE_SUBMITTED
    if run.pending_decision is not None or waiting:
        return TaskState.TASK_STATE_INPUT_REQUIRED
    return TaskState.TASK_STATE_WORKING


def task(run: RunView, *, waiting: bool, answer: str | None = None) -> Task:
    """The run as a task; `answer` is its last answer, shown while it waits for a message."""
    found = Task(id=str(run.run_id), context_id=str(run.run_id),
                 status=task_status(run, waiting=waiting, answer=answer),
                 metadata=struct({"kind": run.kind, "run_status": run.status,
                                   "phase_name": run.phase_name, "last_seq": run.last_seq,
                                   "stop_reason": run.stop_reason}))
    if run.result is not None:
        found.artifacts.append(Artifact(artifact_id="result", name="result",
                                        parts=[data_part(run.result, RUN_RESULT)]))
    return found


def task_status(run: RunView, *, waiting: bool, answer: str | None = None) -> TaskStatus:
    """The state with a message saying what it waits for or why it ended: while a gate
    waits, the request as a data part (with the JSON Schema of an answer) beside its text."""
    state = task_state(run, waiting=waiting)
    parts: list[Part]
    if run.pending_decision is not None:
        parts = decision_parts(run.pending_decision)
    elif state == TaskState.TASK_STATE_INPUT_REQUIRED:
        parts = [Part(text=answer or "The agent waits for your next message.")]
    elif run.error_message:
        parts = [Part(text=run.error_message)]
    else:
        parts = [Part(text=_what(run))]
    return TaskStatus(state=state, timestamp=_timestamp(run.updated_at),
                      message=Message(message_id=f"{run.run_id}-{run.last_seq}",
                                      context_id=str(run.run_id), task_id=str(run.run_id),
                                      role=Role.ROLE_AGENT, parts=parts))


def decision_parts(request: DecisionView) -> list[Part]:
    """The request as the REST API shows it, plus `responseSchema`: what answering takes."""
    options = ", ".join(f"{o.value} ({o.label})" for o in request.options)
    text = f"{request.title}\n\n{request.description}\n\nOptions: {options}"
    if request.recommended_option:
        text += f"; recommended: {request.recommended_option}"
    payload = {**request.model_dump(mode="json"), "responseSchema": payload_schema(request)}
    return [Part(text=text), data_part(payload, DECISION_REQUEST)]


def status_update(run_id: UUID, status: TaskStatus, event: EventView) -> TaskStatusUpdateEvent:
    """One run event as a status update: the task's state when it was sent, the event itself
    and its `seq` in the metadata (a subscriber resumes after it with `Last-Event-ID`)."""
    return TaskStatusUpdateEvent(
        task_id=str(run_id), context_id=str(run_id), status=status,
        metadata=struct({"seq": event.seq, PART_TYPE: RUN_EVENT,
                         "event": event.model_dump(mode="json")}))


def message_artifact(run_id: UUID, delta: MessageDelta, text: str, *,
                     append: bool) -> TaskArtifactUpdateEvent:
    """A piece of the agent's answer being written (issue 43), as an update of the artifact
    named after its message: `append` adds it, else it replaces the artifact (its first piece,
    or a retried model request starting over). The finished answer is the task's status
    message, as ever; the artifact's metadata carries the `message_id` it will have."""
    return TaskArtifactUpdateEvent(
        task_id=str(run_id), context_id=str(run_id), append=append, last_chunk=False,
        artifact=Artifact(artifact_id=f"message-{delta.message_id}", name="answer (live)",
                          parts=[Part(text=text)]),
        metadata=struct({"message_id": delta.message_id, "attempt": delta.attempt}))


def history_message(run_id: UUID, entry: TranscriptEntry) -> Message:
    """One line of an agent run's transcript as a message of its task's history."""
    role = Role.ROLE_USER if entry.role == "user" else Role.ROLE_AGENT
    return Message(message_id=f"{run_id}-{entry.seq}", context_id=str(run_id),
                   task_id=str(run_id), role=role, parts=[Part(text=entry.text or "")])


def data_part(value: Any, kind: str) -> Part:
    return Part(data=json_format.ParseDict(_plain(value), struct_pb2.Value()),
                media_type=JSON, metadata=struct({PART_TYPE: kind}))


# --- messages in -----------------------------------------------------------------------


class Said(BaseModel):
    """What a message carries: at most one JSON object, and its text parts joined."""

    data: dict[str, Any] | None
    text: str | None


def said(message: Message) -> Said:
    data = [whole_numbers(json_format.MessageToDict(p.data)) for p in message.parts
            if p.HasField("data")]
    if len(data) > 1 or (data and not isinstance(data[0], dict)):
        raise ApiError(422, "invalid_request", "message: at most one data part, a JSON object")
    texts = [p.text for p in message.parts if p.HasField("text") and p.text.strip()]
    if not data and not texts:
        raise ApiError(422, "invalid_request", "message: give a data part or a text part")
    return Said(data=data[0] if data else None, text="\n".join(texts) or None)


def start_body(message: Message, registry: Registry) -> dict[str, Any]:
    """The `POST /runs` body a message for a new task stands for: the kind from its metadata
    (`default_kind` when absent), the data part as the input; text is the first message of a
    run whose kind takes messages."""
    meta = whole_numbers(json_format.MessageToDict(message.metadata))
    kind = meta.get(KIND_KEY, default_kind(registry))
    content = said(message)
    run_input = dict(content.data or {})
    if content.text is not None:
        if not isinstance(kind, str) or registry.messages(kind) is None:
            raise ApiError(422, "invalid_request", f"message: text is the message of a run "
                                                   f"that takes messages; a {kind} run takes "
                                                   f"its input as a data part")
        if "message" in run_input:
            raise ApiError(422, "invalid_request", "message: the first message as text or as "
                                                   "input.message, not both")
        run_input["message"] = content.text
    return {"kind": kind, "input": run_input, **{k: meta[k] for k in START_KEYS if k in meta}}


def decision(data: dict[str, Any]) -> DecisionRequest:
    """The body `POST /runs/{id}/decisions/{checkpoint}` takes, from a data part."""
    try:
        return DecisionRequest.model_validate(data)
    except ValidationError as error:
        raise invalid_request(error.errors()) from error


def webhook(config: TaskPushNotificationConfig) -> WebhookCreate:
    """A push notification config as the webhook it is: every webhook event of the task's
    run, to its URL, signed per Standard Webhooks with a secret the server makes, carrying
    the config's `token` (`push_token`) and `authentication` (`push_authorization`)."""
    try:
        return WebhookCreate.model_validate({"url": config.url,
                                             "events": list(WEBHOOK_EVENT_TYPES)})
    except ValidationError as error:
        raise invalid_request(error.errors()) from error


def push_token(config: TaskPushNotificationConfig) -> str | None:
    """The config's opaque token, sent back to its receiver in `X-A2A-Notification-Token`
    with every delivery (none: the config has none). It goes into an HTTP header: printable
    ASCII, at most `TOKEN_LIMIT` characters."""
    if not config.token:
        return None
    if len(config.token) > TOKEN_LIMIT or not _HEADER_SAFE.fullmatch(config.token):
        raise ApiError(422, "invalid_request", f"token: at most {TOKEN_LIMIT} printable ASCII "
                                               "characters, without surrounding spaces",
                       details=[{"loc": ["token"], "msg": "not a header-safe token",
                                 "type": "value_error"}])
    return config.token


def push_authorization(config: TaskPushNotificationConfig) -> str | None:
    """The config's `authentication` as the `Authorization` header every delivery carries
    (`<scheme> <credentials>`; A2A: the agent MUST include the credentials in each
    delivery), or None without one."""
    if not config.HasField("authentication"):
        return None
    scheme, credentials = config.authentication.scheme, config.authentication.credentials
    if not _AUTH_SCHEME.fullmatch(scheme):
        raise ApiError(422, "invalid_request", "authentication.scheme: an HTTP authentication "
                                               "scheme (such as Bearer or Basic)",
                       details=[{"loc": ["authentication", "scheme"],
                                 "msg": "not an HTTP authentication scheme",
                                 "type": "value_error"}])
    if credentials and (len(credentials) > TOKEN_LIMIT
                        or not _HEADER_SAFE.fullmatch(credentials)):
        raise ApiError(422, "invalid_request", f"authentication.credentials: at most "
                                               f"{TOKEN_LIMIT} printable ASCII characters, "
                                               "without surrounding spaces",
                       details=[{"loc": ["authentication", "credentials"],
                                 "msg": "not header-safe credentials", "type": "value_error"}])
    return f"{scheme} {credentials}" if credentials else scheme


def push_config(hook: WebhookView, *, token: str = "") -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(id=str(hook.webhook_id), task_id=str(hook.run_id),
                                      url=hook.url, token=token)


# --- refusals --------------------------------------------------------------------------


def a2a_error(error: ApiError, *, conflict: type[A2AError] = UnsupportedOperationError
              ) -> A2AError:
    """The protocol's own error for a refusal, carrying the API's code, status and message
    (and its details, as JSON) in the error's `google.rpc.ErrorInfo` metadata. A run the
    caller may not see is a task that does not exist; `conflict` is the error for a 409
    (a finished task is not cancelable, a message to it is not an operation it supports)."""
    if error.code in ("run_not_found", "webhook_not_found"):
        # A2A has no error of its own for a missing push config: the spec lists
        # TaskNotFoundError for its methods.
        kind: type[A2AError] = TaskNotFoundError
    elif error.status == 409:
        kind = conflict
    elif error.status in (404, 422):
        kind = InvalidParamsError
    elif error.status in (401, 403):
        kind = InvalidRequestError
    else:
        kind = InternalError
    data = {"code": error.code, "status": str(error.status)}
    if error.details is not None:
        data["details"] = json.dumps(error.details, default=str)
    return kind(error.message, data=data)


# --- helpers ---------------------------------------------------------------------------


def _what(run: RunView) -> str:
    if run.status == "pending":
        return "The run has been accepted and is starting."
    if run.status in _FINISHED:
        return f"The run has {run.status} ({run.stop_reason or run.status})."
    return f"Working: phase {run.current_phase} ({run.phase_name or 'starting'})."


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    """A JSON object as protobuf's Struct (metadata, an extension's params)."""
    return json_format.ParseDict(_plain(value), struct_pb2.Struct())


def _plain(value: Any) -> Any:
    """JSON types only (a model's dates and UUIDs as strings), as protobuf's Value holds."""
    return json.loads(json.dumps(value, default=str))


def whole_numbers(value: Any) -> Any:
    """protobuf's Value keeps every number as a double: 200 arrives as 200.0. JSON does not
    tell them apart, but the kinds' inputs and answer schemas do (`integer`)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


def _timestamp(at: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(at)
    return stamp

