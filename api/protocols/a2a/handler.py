"""The A2A request handler: each JSON-RPC method on the service layer, the read model behind
every task (no task store: the run is the task; see `mapping` and `tasks`)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncGenerator
from typing import Any, NamedTuple
from uuid import UUID

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import (
    RequestHandler,
    validate_request_params,
)
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    TaskNotCancelableError,
)
from a2a.utils.task import validate_page_size
from pydantic import TypeAdapter, ValidationError

from waystation.api.errors import ApiError, invalid_request
from waystation.api.protocols.a2a import mapping
from waystation.api.protocols.a2a.tasks import (
    Call,
    calling,
    history_wanted,
    raw_params,
    refusals,
    task,
    updates,
    visible,
)
from waystation.api.queries import InboxQuery, RunFilter
from waystation.api.schemas import MessageRequest, run_create_model
from waystation.api.services import decisions, messages, runs, webhooks
from waystation.api.services.runs import TaskStateName
from waystation.contracts.statuses import RunStatus
from waystation.persistence.models import TERMINAL_RUN_STATUSES, RunRow
from waystation.registry import Registry

# A blocking SendMessage or CancelTask waits this long for the task to need input or end,
# then answers with the task as it is (the client follows with GetTask or SubscribeToTask).
BLOCKING_WAIT_SECONDS = 30.0
# A task state asked for in ListTasks, as the run status to list by (none: any, sorted out
# by the derived state).
_LISTED_STATUS: dict[int, RunStatus] = {
    TaskState.TASK_STATE_SUBMITTED: "pending", TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed", TaskState.TASK_STATE_REJECTED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled"}
# A task state asked for in ListTasks, as `runs.count_tasks` counts it.
_COUNTED_STATE: dict[int, TaskStateName] = {
    TaskState.TASK_STATE_SUBMITTED: "submitted", TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input_required",
    TaskState.TASK_STATE_COMPLETED: "completed", TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected", TaskState.TASK_STATE_CANCELED: "canceled"}


class Acted(NamedTuple):
    """A message's run, and its last seq before and after what the message did."""

    run_id: UUID
    before: int
    after: int


class WaystationHandler(RequestHandler):
    """A2A's methods, each on the same service functions as the REST routes."""

    def __init__(self, registry: Registry) -> None:
        self._start_body: TypeAdapter[Any] = TypeAdapter(
            run_create_model([registry.kind(name) for name in registry.names]))

    # --- reading ---------------------------------------------------------------------

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        history = history_wanted(params, default=None)
        async with calling(context) as call:
            return await task(call, await visible(call, params.id), history=history)

    @validate_request_params
    async def on_list_tasks(self, params: ListTasksRequest,
                            context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks, most recently updated first, artifacts only with
        `includeArtifacts`; `input-required` lists its inbox (the requests
        it may decide) and its agent runs waiting for a message. `totalSize` is counted by
        the database before pagination; history only when `historyLength` asks for it."""
        _known_status(raw_params(context).get("status"))
        size = params.page_size if params.HasField("page_size") \
            else DEFAULT_LIST_TASKS_PAGE_SIZE
        validate_page_size(size)
        history = history_wanted(params, default=0)
        async with calling(context) as call:
            token = ""
            if params.context_id:
                # The context is the run: a context the caller sees no run of has no tasks.
                found = await _in_context(call, params.context_id)
            elif params.status == TaskState.TASK_STATE_INPUT_REQUIRED:
                found = await _waiting(call, size)
            else:
                page = await runs.list_tasks(call.conn, call.user,
                                             status=_LISTED_STATUS.get(params.status),
                                             limit=size, cursor=params.page_token or None)
                found = [await runs.visible_run(call.conn, call.user, v.run_id)
                         for v in page.runs]
                token = page.next_cursor or ""
            tasks = [await task(call, run, history=history) for run in found]
            if params.status:
                tasks = [t for t in tasks if t.status.state == params.status]
            if not params.include_artifacts:
                for found_task in tasks:
                    found_task.ClearField("artifacts")
            total = len(tasks) if params.context_id else await runs.count_tasks(
                call.conn, call.user, _COUNTED_STATE.get(params.status), registry=call.registry)
        return ListTasksResponse(tasks=tasks, next_page_token=token, page_size=size,
                                 total_size=total)

    @validate_request_params
    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Event]:
        """The task, then a status update per run event until it ends; `Last-Event-ID: <seq>`
        replays the events after that seq first."""
        resume = context.state.get("headers", {}).get("last-event-id")
        if resume is not None and not resume.strip().isdigit():
            raise mapping.a2a_error(ApiError(422, "invalid_request", "Last-Event-ID must be a "
                                                                     "non-negative integer seq"))
        async with calling(context) as call:
            run = await visible(call, params.id)
            if run.status in TERMINAL_RUN_STATUSES:  # A2A: a finished task has nothing to send
                raise ApiError(409, "run_finished", f"run {run.id} is {run.status}")
            first = await task(call, run)
        yield first
        after = int(resume) if resume is not None else run.last_seq
        async for update in updates(context, run.id, after_seq=after, baseline=after,
                                    until_input=False):
            yield update

    # --- acting ----------------------------------------------------------------------

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest,
                              context: ServerCallContext) -> Task | Message:
        """Start a run, answer its request or talk to it; unless `returnImmediately`, answer
        once the task needs input or has ended (or after `BLOCKING_WAIT_SECONDS`)."""
        history = history_wanted(params.configuration, default=None)
        acted = await self._act(params, context)
        if not params.configuration.return_immediately:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(BLOCKING_WAIT_SECONDS):
                    async for _ in updates(context, acted.run_id, after_seq=acted.after,
                                           baseline=acted.after, until_input=True):
                        pass
        async with calling(context) as call:
            return await task(call, await runs.visible_run(call.conn, call.user,
                                                            acted.run_id), history=history)

    @validate_request_params
    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Event]:
        """The task, then a status update per run event from the message's own (a decision's
        `gate.decided`, a message's `message.received`) until it needs input or ends."""
        history = history_wanted(params.configuration, default=None)
        acted = await self._act(params, context)
        async with calling(context) as call:
            first = await task(call, await runs.visible_run(call.conn, call.user,
                                                             acted.run_id), history=history)
        yield first
        async for update in updates(context, acted.run_id, after_seq=acted.before,
                                    baseline=acted.after, until_input=True):
            yield update

    async def _act(self, params: SendMessageRequest, context: ServerCallContext) -> Acted:
        """Do what the message asks."""
        message, configuration = params.message, params.configuration
        # The message id makes a resent message apply once, as an Idempotency-Key does.
        once = "a2a-" + hashlib.sha256(message.message_id.encode()).hexdigest()[:40]
        async with calling(context) as call:
            if not message.task_id:
                try:
                    body = self._start_body.validate_python(
                        mapping.start_body(message, call.registry))
                except ValidationError as error:
                    raise invalid_request(error.errors()) from error
                created = await runs.start_run(call.conn, await call.temporal(), call.user,
                                               body, registry=call.registry,
                                               settings=call.settings, idempotency_key=once)
                if configuration.HasField("task_push_notification_config"):
                    await _push_to(call, await runs.visible_run(call.conn, call.user,
                                                                created.run_id),
                                   configuration.task_push_notification_config)
                return Acted(run_id=created.run_id, before=0, after=0)
            run = await visible(call, message.task_id)
            if configuration.HasField("task_push_notification_config"):
                await _push_to(call, run, configuration.task_push_notification_config)
            content = mapping.said(message)
            if content.data is not None:
                checkpoint = run.hitl_state
                if checkpoint is None:
                    raise ApiError(409, "not_pending", f"run {run.id} waits for no "
                                                        f"decision (it is {run.status})")
                await decisions.decide(call.conn, await call.temporal(), call.user, run,
                                       checkpoint, mapping.decision(content.data),
                                       idempotency_key=once)
            else:
                assert content.text is not None, "said() refuses a message with neither"
                await messages.send_message(call.conn, await call.temporal(), call.user, run,
                                            MessageRequest(text=content.text),
                                            registry=call.registry, idempotency_key=once)
            after = (await runs.visible_run(call.conn, call.user, run.id)).last_seq
            return Acted(run_id=run.id, before=run.last_seq, after=after)

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest,
                             context: ServerCallContext) -> Task:
        """Cancel the run, then answer once it has ended (or after the blocking wait)."""
        async with calling(context) as call:
            run = await visible(call, params.id)
            with refusals(conflict=TaskNotCancelableError):
                await runs.cancel_run(call.conn, await call.temporal(), call.user, run)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(BLOCKING_WAIT_SECONDS):
                async for _ in updates(context, run.id, after_seq=run.last_seq,
                                       baseline=run.last_seq, until_input=False):
                    pass
        async with calling(context) as call:
            return await task(call, await runs.visible_run(call.conn, call.user, run.id))

    # --- push notifications: webhooks for one run -------------------------------------

    @validate_request_params
    async def on_create_task_push_notification_config(
            self, params: TaskPushNotificationConfig,
            context: ServerCallContext) -> TaskPushNotificationConfig:
        async with calling(context) as call:
            run = await visible(call, params.task_id)
            token = mapping.push_token(params)
            created = await webhooks.create_webhook(
                call.conn, call.user, mapping.webhook(params), settings=call.settings, run=run,
                notification_token=token,
                notification_authorization=mapping.push_authorization(params))
        # The client's own token echoed; without one, the signing secret, shown this once.
        return mapping.push_config(created, token=token or created.secret)

    @validate_request_params
    async def on_get_task_push_notification_config(
            self, params: GetTaskPushNotificationConfigRequest,
            context: ServerCallContext) -> TaskPushNotificationConfig:
        async with calling(context) as call:
            run = await visible(call, params.task_id)
            hooks = (await webhooks.list_webhooks(call.conn, call.user, run=run)).webhooks
            found = [h for h in hooks if str(h.webhook_id) == params.id]
            if not found:
                raise ApiError(404, "webhook_not_found", f"webhook {params.id} not found")
        return mapping.push_config(found[0])

    @validate_request_params
    async def on_list_task_push_notification_configs(
            self, params: ListTaskPushNotificationConfigsRequest,
            context: ServerCallContext) -> ListTaskPushNotificationConfigsResponse:
        async with calling(context) as call:
            run = await visible(call, params.task_id)
            hooks = (await webhooks.list_webhooks(call.conn, call.user, run=run)).webhooks
        return ListTaskPushNotificationConfigsResponse(
            configs=[mapping.push_config(h) for h in hooks])

    @validate_request_params
    async def on_delete_task_push_notification_config(
            self, params: DeleteTaskPushNotificationConfigRequest,
            context: ServerCallContext) -> None:
        async with calling(context) as call:
            run = await visible(call, params.task_id)
            try:
                webhook_id = UUID(params.id)
            except ValueError:
                raise ApiError(404, "webhook_not_found",
                               f"webhook {params.id} not found") from None
            await webhooks.delete_webhook(call.conn, call.user, webhook_id, run=run)

    @validate_request_params
    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError


async def _push_to(call: Call, run: RunRow, config: TaskPushNotificationConfig) -> None:
    """A message's push config, once per URL: a resent message adds no second webhook."""
    hooks = (await webhooks.list_webhooks(call.conn, call.user, run=run)).webhooks
    if config.url not in {h.url for h in hooks}:
        await webhooks.create_webhook(call.conn, call.user, mapping.webhook(config),
                                      settings=call.settings, run=run,
                                      notification_token=mapping.push_token(config),
                                      notification_authorization=mapping.push_authorization(
                                          config))


def _known_status(status: Any) -> None:
    """A ListTasks `status` that names no task state is refused (-32602), not read as none
    given (as the SDK's parse would: it maps an unknown enum value to 0)."""
    if status is None or status in TaskState.keys() or (  # noqa: SIM118 - a protobuf enum
            isinstance(status, int) and not isinstance(status, bool)
            and status in TaskState.values()):
        return
    raise InvalidParamsError(message=f"status: {status!r} is not a task state (one of "
                                     f"{', '.join(TaskState.keys())})")


async def _in_context(call: Call, context_id: str) -> list[RunRow]:
    """The run a context id names, if the caller sees it."""
    try:
        return [await visible(call, context_id)]
    except ApiError as refused:
        if refused.code != "run_not_found":
            raise
        return []


async def _waiting(call: Call, size: int) -> list[RunRow]:
    """Runs waiting for the caller: its inbox's requests' runs, newest first, then its runs
    waiting for a message (of each kind that takes messages)."""
    inbox = await decisions.inbox(call.conn, call.user, InboxQuery(limit=size))
    ids = list(dict.fromkeys(d.run_id for d in inbox.decisions))
    for kind in call.registry.names:
        if call.registry.messages(kind) is None:
            continue
        paused = await runs.list_runs(call.conn, call.user, RunFilter(
            kind=kind, status="paused", limit=size), registry=call.registry)
        ids += [v.run_id for v in paused.runs if v.run_id not in ids
                and messages.waits_for_message(v, registry=call.registry)]
    return [await runs.visible_run(call.conn, call.user, run_id) for run_id in ids[:size]]


