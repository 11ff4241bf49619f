"""Waystation as an A2A agent, driven by the `a2a-sdk` client over HTTP: the real app under
uvicorn, the dev server, real Postgres and an in-process worker with the offline backend."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.client import Client, ClientCallContext
from a2a.client.errors import A2AClientError
from a2a.helpers import get_data_parts, get_message_text
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    InvalidRequestError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format, struct_pb2
from standardwebhooks import Webhook

from tests.agent_helpers import BOOK, SEARCH
from tests.helpers import IDEA, eventually, live_api
from tests.webhook_receiver import Receiver
from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.settings import Settings
from waystation.testing import InProcessApi

SECRET = "a2a-test-secret-0123456789-0123456789-abcd"
INPUT_REQUIRED, COMPLETED = TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_COMPLETED


@pytest_asyncio.fixture
async def api(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[InProcessApi]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=1.0) as api:
        yield api


@pytest.fixture
def people() -> dict[str, str]:
    """Names of this test's own (the database is shared by the whole session)."""
    tag = uuid.uuid4().hex[:6]
    return {name: f"{name}-{tag}" for name in ("alice", "bob", "carol", "priya")}


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}  # type: ignore[arg-type]


@asynccontextmanager
async def a2a(api: InProcessApi, user: str | None, *, streaming: bool = False,
              headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """An A2A client of the card at the API's well-known URL, signed in as `user` (or with
    `headers`, another module's credentials)."""
    if headers is None:
        headers = auth(user) if user else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, api.url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)
        yield client
        await client.close()


def message(*, task_id: str = "", data: dict[str, Any] | None = None, text: str | None = None,
            **metadata: Any) -> SendMessageRequest:
    parts = []
    if data is not None:
        parts.append(Part(data=json_format.ParseDict(data, struct_pb2.Value())))
    if text is not None:
        parts.append(Part(text=text))
    sent = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, task_id=task_id,
                   parts=parts)
    sent.metadata.update(metadata)
    return SendMessageRequest(message=sent)


async def send(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [response async for response in client.send_message(request)]


async def sent_task(client: Client, request: SendMessageRequest) -> Task:
    """The task a blocking (non-streaming) SendMessage answers with."""
    [response] = await send(client, request)
    return response.task


def request_part(task: Task) -> dict[str, Any]:
    """The decision request an `input-required` task carries as its data part."""
    [data] = get_data_parts(task.status.message.parts)
    return data


def validation(**fields: Any) -> SendMessageRequest:
    return message(data={"entrepreneur_input": IDEA, **fields}, kind="validation")


async def test_the_card_names_each_kind_with_its_input_schema_and_the_apis_auth(api):
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, api.url).get_agent_card()
    assert [i.url for i in card.supported_interfaces] == [f"{api.url}/a2a"]
    assert card.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert {"validation", "batch", "mobile_agent", "agent"} <= {s.id for s in card.skills}
    assert card.capabilities.streaming and card.capabilities.push_notifications
    [extension] = card.capabilities.extensions
    schemas = json_format.MessageToDict(extension.params)["inputSchemas"]
    assert schemas["validation"]["required"] == ["entrepreneur_input"]
    assert schemas.keys() == {s.id for s in card.skills}
    # The skill itself carries its input schema, where a model choosing a skill reads.
    skill = next(s for s in card.skills if s.id == "validation")
    assert json.loads(skill.description.split("): ", 1)[1]) == schemas["validation"]
    schemes = {name: s.http_auth_security_scheme for name, s in card.security_schemes.items()}
    assert {(s.scheme, s.bearer_format) for s in schemes.values()} == {("Bearer", "JWT"),
                                                                       ("Bearer", "wsk_")}


async def test_the_readme_s_discovery_finds_the_agent(api, people):
    """The README's card URL and client lines, on this API's address for the default one."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "`http://127.0.0.1:8000/.well-known/agent-card.json`" in readme
    snippet = re.search(r"```python\n(import httpx\nfrom a2a\.client.*?)```", readme, re.DOTALL)
    assert snippet is not None, "README shows how an A2A client finds Waystation"
    code = snippet[1].replace("http://127.0.0.1:8000", api.url)
    found: dict[str, Any] = {"token": issue_token(SECRET, people["alice"])}
    exec(compile(f"async def _find():\n{textwrap.indent(code, '    ')}\n    return client, http",
                 "README.md", "exec"), found)
    client, http = await found["_find"]()
    try:
        updates = await send(client, validation(gates=["approve_founders_brief"]))  # streamed
        assert updates[-1].status_update.status.state == INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=updates[0].task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    finally:
        await client.close()
        await http.aclose()


async def test_with_an_identity_provider_the_card_names_its_discovery_document(
        migrated_url, task_queue):
    app = create_app(Settings(database_url=migrated_url, jwt_secret=SECRET,
                              temporal_task_queue=task_queue, jwks_url="https://id.example/jwks",
                              jwt_audience="waystation", jwt_issuer="https://id.example/"))
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
        card = await A2ACardResolver(http, "http://localhost").get_agent_card()
    oidc = card.security_schemes["openIdConnect"].open_id_connect_security_scheme
    assert oidc.open_id_connect_url == "https://id.example/.well-known/openid-configuration"
    assert {name for r in card.security_requirements for name in r.schemes} == {
        "bearer", "apiKey", "openIdConnect"}


async def test_a_validation_task_waits_is_answered_and_streams_to_completed(api, people):
    async with a2a(api, people["alice"]) as alice, \
            a2a(api, people["alice"], streaming=True) as streaming:
        task = await sent_task(alice, validation(
            gates=["approve_founders_brief", "approve_vpc_completion"]))
        assert task.status.state == INPUT_REQUIRED
        asked = request_part(task)
        assert asked["checkpoint_name"] == "approve_founders_brief"
        assert asked["recommended_option"] in [o["value"] for o in asked["options"]]
        assert len(asked["digest"]) == 64
        assert asked["responseSchema"]["properties"]["decision"]["enum"] == [
            o["value"] for o in asked["options"]]
        assert asked["title"] in get_message_text(task.status.message)
        inbox = await alice.list_tasks(ListTasksRequest(status=INPUT_REQUIRED))
        assert task.id in [t.id for t in inbox.tasks]

        # An unknown option is refused with the API's code; the task still waits.
        with pytest.raises(InvalidParamsError) as refused:
            await send(alice, message(task_id=task.id, data={"decision": "perhaps"}))
        assert refused.value.data["code"] == "unknown_option"
        assert refused.value.data["status"] == "422"
        again = await alice.get_task(GetTaskRequest(id=task.id))
        assert again.status.state == INPUT_REQUIRED

        # Answered on a stream: status updates, one per run event, to the next gate.
        updates = await send(streaming, message(
            task_id=task.id, data={"decision": "approve", "feedback": "good brief",
                                   "digest": asked["digest"]}))
        assert updates[0].HasField("task")
        seqs = [int(u.status_update.metadata["seq"]) for u in updates[1:]]
        assert updates[1].status_update.metadata["event"]["type"] == "gate.decided"
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        last = updates[-1].status_update.status
        assert last.state == INPUT_REQUIRED
        assert get_data_parts(last.message.parts)[0]["checkpoint_name"] == \
            "approve_vpc_completion"

        # Subscribed from a seq before it (resumable), while the last gate is answered.
        resume = ClientCallContext(service_parameters={"Last-Event-ID": str(seqs[0])})
        subscription = streaming.subscribe(SubscribeToTaskRequest(id=task.id), context=resume)
        subscribed = await anext(subscription)  # the task first: subscribed before it ends
        assert subscribed.task.status.state == INPUT_REQUIRED

        async def follow() -> list[StreamResponse]:
            return [subscribed] + [u async for u in subscription]
        following = asyncio.create_task(follow())
        done = await sent_task(alice, message(task_id=task.id, data={"decision": "approve"}))
        assert done.status.state == COMPLETED
        [result] = done.artifacts
        assert get_data_parts(result.parts)[0]["status"] == "completed"
        followed = await asyncio.wait_for(following, 30)
        replayed = [int(u.status_update.metadata["seq"]) for u in followed[1:]
                    if "seq" in u.status_update.metadata]
        assert replayed == list(range(seqs[0] + 1, seqs[0] + 1 + len(replayed)))
        assert followed[-1].status_update.status.state == COMPLETED
        with pytest.raises(UnsupportedOperationError):
            await anext(streaming.subscribe(SubscribeToTaskRequest(id=task.id)))

        # The same audit as the API's: alice's votes with her feedback.
        async with httpx.AsyncClient(base_url=api.url, headers=auth(people["alice"])) as http:
            decided = (await http.get(f"/runs/{task.id}/decisions")).json()["decisions"]
        assert [(d["checkpoint_name"], d["decided_by"], d["feedback"]) for d in decided] == [
            ("approve_founders_brief", people["alice"], "good brief"),
            ("approve_vpc_completion", people["alice"], None)]
        inbox = await alice.list_tasks(ListTasksRequest(status=INPUT_REQUIRED))
        assert task.id not in [t.id for t in inbox.tasks]


async def test_a_rejection_that_ends_the_run_and_a_cancel(api, people):
    async with a2a(api, people["alice"]) as alice:
        task = await sent_task(alice, validation(gates=["approve_founders_brief"],
                                                 max_phase_retries=0))
        rejected = await sent_task(alice, message(
            task_id=task.id, data={"decision": "reject", "feedback": "not convincing"}))
        assert rejected.status.state == TaskState.TASK_STATE_REJECTED

        other = await sent_task(alice, validation())
        assert other.status.state == INPUT_REQUIRED
        canceled = await alice.cancel_task(CancelTaskRequest(id=other.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(UnsupportedOperationError) as finished:
            await send(alice, message(task_id=other.id, data={"decision": "approve"}))
        assert finished.value.data["code"] == "not_pending"
        assert "(it is canceled)" in finished.value.message
        listed = await alice.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_CANCELED))
        assert other.id in [t.id for t in listed.tasks]


async def test_a_bad_start_is_refused_naming_the_field(api, people):
    async with a2a(api, people["alice"]) as alice:
        with pytest.raises(InvalidParamsError) as short:
            await send(alice, message(data={"entrepreneur_input": "too short"},
                                      kind="validation"))
        assert short.value.data["code"] == "invalid_request"
        assert short.value.message.startswith("validation.input.entrepreneur_input:")
        with pytest.raises(InvalidParamsError) as unknown:
            await send(alice, message(data={}, kind="nonesuch"))
        assert unknown.value.message.startswith("kind: unknown run kind 'nonesuch'; one of ")
        with pytest.raises(InvalidParamsError) as text:
            await send(alice, message(text="an idea in words", kind="validation"))
        assert "a validation run takes its input as a data part" in text.value.message
        unnamed = message(text="hello")
        unnamed.message.message_id = ""
        with pytest.raises(InvalidParamsError):
            await send(alice, unnamed)


async def test_plain_json_rpc_as_docs_a2a_shows_it(api, people):
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "configuration": {"returnImmediately": True}, "message": {
            "messageId": str(uuid.uuid4()), "role": "ROLE_USER",
            "metadata": {"kind": "validation"},
            "parts": [{"data": {"entrepreneur_input": "Coffee subscriptions for small offices",
                                "gates": ["approve_founders_brief"]}}]}}}
    async with httpx.AsyncClient(base_url=api.url, headers=auth(people["alice"]),
                                 timeout=60) as http:
        unversioned = (await http.post("/a2a", json=body)).json()
        assert unversioned["error"]["code"] == -32009  # taken for A2A 0.3, not served
        answered = await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
        task = answered.json()["result"]["task"]
        assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        run = (await http.get(f"/runs/{task['id']}")).json()
        assert run["kind"] == "validation" and run["input"]["gates"] == ["approve_founders_brief"]
        await http.post(f"/runs/{task['id']}/cancel")


async def test_another_user_sees_no_task_and_nobody_unauthenticated_gets_in(api, people):
    async with a2a(api, people["alice"]) as alice, a2a(api, people["bob"]) as bob:
        task = await sent_task(alice, validation())
        for call in (bob.get_task(GetTaskRequest(id=task.id)),
                     bob.cancel_task(CancelTaskRequest(id=task.id)),
                     send(bob, message(task_id=task.id, data={"decision": "approve"}))):
            with pytest.raises(TaskNotFoundError) as hidden:
                await call
            assert hidden.value.data["code"] == "run_not_found"
        assert task.id not in [t.id for t in (await bob.list_tasks(ListTasksRequest())).tasks]
        assert (await alice.get_task(GetTaskRequest(id=task.id))).status.state == INPUT_REQUIRED
        await alice.cancel_task(CancelTaskRequest(id=task.id))

    async with a2a(api, None) as nobody:
        with pytest.raises(A2AClientError, match="401"):
            await nobody.get_task(GetTaskRequest(id=task.id))
    async with httpx.AsyncClient() as http:
        refused = await http.post(f"{api.url}/a2a", json={
            "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}})
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert refused.json()["error"]["code"] == "unauthenticated"


async def test_a_group_task_is_decided_by_the_roles_its_gate_names(api, people):
    async with httpx.AsyncClient(base_url=api.url, headers=auth(people["alice"])) as http:
        group_id = (await http.post("/groups", json={"name": "Launch"})).json()["group_id"]
        for who, role in (("bob", "viewer"), ("carol", "approver")):
            added = await http.post(f"/groups/{group_id}/members",
                                    json={"user": people[who], "role": role})
            assert added.status_code == 201, added.text
    async with a2a(api, people["alice"]) as alice, a2a(api, people["bob"]) as viewer, \
            a2a(api, people["carol"]) as approver:
        task = await sent_task(alice, message(
            data={"entrepreneur_input": IDEA, "gates": ["approve_founders_brief"]},
            kind="validation", group_id=group_id,
            gates={"approve_founders_brief": {"quorum": 2}}))  # as POST /runs takes them
        assert request_part(task)["quorum"] == 2
        assert (await viewer.get_task(GetTaskRequest(id=task.id))).status.state == INPUT_REQUIRED
        with pytest.raises(InvalidRequestError) as refused:
            await send(viewer, message(task_id=task.id, data={"decision": "approve"}))
        assert refused.value.data["code"] == "not_allowed"
        assert "role 'viewer' may not decide" in refused.value.message
        waiting = await viewer.list_tasks(ListTasksRequest(status=INPUT_REQUIRED))
        assert task.id not in [t.id for t in waiting.tasks]  # not in a viewer's inbox
        inbox = await approver.list_tasks(ListTasksRequest(status=INPUT_REQUIRED))
        assert task.id in [t.id for t in inbox.tasks]
        # One approval of the two the quorum takes: a vote, and the task still waits.
        voted = await sent_task(approver, message(task_id=task.id, data={"decision": "approve"}))
        assert voted.status.state == INPUT_REQUIRED
        assert [v["voter"] for v in request_part(voted)["votes"]] == [people["carol"]]
        with pytest.raises(UnsupportedOperationError) as twice:
            await send(approver, message(task_id=task.id, data={"decision": "approve"}))
        assert twice.value.data["code"] == "already_voted"
        done = await sent_task(alice, message(task_id=task.id, data={"decision": "approve"}))
        assert done.status.state == COMPLETED

    # A member removed while subscribed hears nothing more of the group's task.
    async with a2a(api, people["alice"]) as alice, \
            a2a(api, people["carol"], streaming=True) as member:
        task = await sent_task(alice, message(data={"entrepreneur_input": IDEA}, kind="validation",
                                              group_id=group_id))
        updates = member.subscribe(SubscribeToTaskRequest(id=task.id))
        assert (await anext(updates)).task.id == task.id
        async with httpx.AsyncClient(base_url=api.url, headers=auth(people["alice"])) as http:
            removed = await http.delete(f"/groups/{group_id}/members/{people['carol']}")
            assert removed.status_code == 204
        with pytest.raises(TaskNotFoundError):
            async for _ in updates:
                pass
        await alice.cancel_task(CancelTaskRequest(id=task.id))


async def test_an_agent_task_talks_and_waits_at_a_tool_approval(api, people):
    async with a2a(api, people["priya"]) as priya:
        task = await sent_task(priya, message(text=SEARCH))  # no kind: an agent run
        assert task.status.state == INPUT_REQUIRED
        assert not get_data_parts(task.status.message.parts)
        assert "Old Mill Barn" in get_message_text(task.status.message)

        at_gate = await sent_task(priya, message(task_id=task.id, text=BOOK))
        assert at_gate.status.state == INPUT_REQUIRED
        asked = request_part(at_gate)
        assert asked["checkpoint_name"].startswith("approve_book_vendor")
        edit = next(b for b in asked["responseSchema"]["oneOf"] if b["title"].startswith(
            "Run it with edited"))
        assert edit["required"] == ["decision", "answer"]

        with pytest.raises(UnsupportedOperationError) as busy:
            await send(priya, message(task_id=task.id, text="hello?"))
        assert busy.value.data["code"] == "not_waiting_for_message"
        answered = await sent_task(priya, message(task_id=task.id, data={"decision": "approve"}))
        assert answered.status.state == INPUT_REQUIRED
        assert not get_data_parts(answered.status.message.parts)
        assert "Rosewood" in get_message_text(answered.status.message)
        with pytest.raises(UnsupportedOperationError) as no_gate:
            await send(priya, message(task_id=task.id, data={"decision": "approve"}))
        assert no_gate.value.data["code"] == "not_pending"
        await priya.cancel_task(CancelTaskRequest(id=task.id))


async def test_push_notification_configs_are_signed_webhooks_for_the_task(api, people):
    async with a2a(api, people["alice"]) as alice, a2a(api, people["bob"]) as bob:
        with Receiver() as receiver:
            task = await sent_task(alice, validation(gates=["approve_founders_brief"]))
            config = await alice.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url=receiver.url))
            assert config.task_id == task.id and config.token.startswith("whsec_")
            # One given with the message that starts a task, with the spec's opaque token:
            # sent back with each delivery, beside the signature the server keys itself.
            token = f"opaque-{uuid.uuid4()}"
            request = validation()
            request.configuration.task_push_notification_config.CopyFrom(
                TaskPushNotificationConfig(url=receiver.url, token=token))
            other = await sent_task(alice, request)
            [given] = (await alice.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=other.id))).configs
            assert given.url == receiver.url and not given.token  # shown once, or never

            await sent_task(alice, message(task_id=task.id, data={"decision": "approve"}))
            await alice.cancel_task(CancelTaskRequest(id=other.id))

            def delivered() -> dict[str, list[str]]:
                found: dict[str, list[str]] = {}
                for got in receiver.received:
                    if got.headers.get("x-a2a-notification-token") == token:
                        payload = json.loads(got.body)
                    else:
                        payload = Webhook(config.token).verify(got.body, got.headers)
                    found.setdefault(payload["data"]["run_id"], []).append(payload["type"])
                return found
            await eventually(lambda: asyncio.sleep(0, {task.id, other.id} <= {
                run for run, types in delivered().items() if "run.finished" in types}),
                timeout=30)
            # Registered while the gate waited: what happened from then on, in order.
            assert delivered()[task.id] == ["gate.decided", "run.finished"]
            assert {"gate.opened", "run.finished"} <= set(delivered()[other.id])

        got = await alice.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id=config.id))
        assert got.url == receiver.url
        with pytest.raises(TaskNotFoundError):
            await bob.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id))
        await alice.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=config.id))
        assert not (await alice.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id))).configs
        with pytest.raises(TaskNotFoundError) as unknown:  # the spec's error for it
            await alice.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=config.id))
        assert unknown.value.data["code"] == "webhook_not_found"


async def test_a_streamed_answer_arrives_as_appended_artifact_updates(api, people):
    """Issue 43: SendStreamingMessage gets the planner's answer as it is written, artifact
    updates of one artifact (the first replaces, the rest append) whose text is the answer."""
    async with a2a(api, people["priya"], streaming=True) as priya:
        updates = await send(priya, message(text=SEARCH))
    pieces = [u.artifact_update for u in updates if u.HasField("artifact_update")]
    assert len(pieces) > 3
    assert len({p.artifact.artifact_id for p in pieces}) == 1
    assert [p.append for p in pieces] == [False] + [True] * (len(pieces) - 1)
    written = "".join(get_message_text(p.artifact) for p in pieces)
    # The stream's last update (input-required, written with no event) carries no event.
    events = [u.status_update.metadata["event"] for u in updates
              if u.HasField("status_update") and "event" in u.status_update.metadata]
    answered = [e["output"] for e in events if e["type"] == "agent.answered"]
    assert written == answered[0]["text"]
    assert pieces[0].metadata["message_id"] == answered[0]["message_id"]
