"""Outbound webhooks: registered through the API, enqueued by the recorder, delivered by a
Temporal workflow to a real local receiver, signatures checked with `standardwebhooks`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
import pytest_asyncio
from standardwebhooks import Webhook

from tests.helpers import IDEA, eventually, live_api, started_workflow
from tests.webhook_receiver import Receiver
from waystation.activities.webhooks import NotificationResult
from waystation.api.auth import issue_token
from waystation.persistence import webhooks as webhooks_repo
from waystation.persistence.sealing import PREFIX, SecretsBox, SecretUnreadable, new_key
from waystation.settings import DEV_SECRETS_KEY, Settings

SECRET = "hooks-secret-0123456789-0123456789-abcdef"
GATE = "approve_founders_brief"
ALL_EVENTS = ["gate.opened", "gate.decided", "gate.expired", "run.finished"]
METADATA_AND_UNUSABLE = ["http://169.254.169.254/latest/meta-data/iam/",
                         "http://[::ffff:169.254.169.254]/", "http://[fd00:ec2::254]/",
                         "http://100.100.100.200/latest/meta-data/", "http://[fe80::1]:8080/",
                         "http://0.0.0.0:8000/hook", "http://224.0.0.1/"]


@pytest_asyncio.fixture
async def http(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30) as client:
        yield client


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}


async def test_deliveries_are_signed_retried_and_keep_one_id(http, pool):
    user = f"hooks-{uuid.uuid4().hex[:6]}"
    with Receiver(fail_first=2) as receiver:
        # A host name: the worker resolves it, checks the address and connects to it.
        url = receiver.url.replace("127.0.0.1", "localhost")
        created = await http.post("/webhooks", headers=auth(user),
                                  json={"url": url, "events": ALL_EVENTS})
        assert created.status_code == 201, created.text
        hook = created.json()
        assert hook["secret"].startswith("whsec_")
        listed = (await http.get("/webhooks", headers=auth(user))).json()["webhooks"]
        assert [w["webhook_id"] for w in listed] == [hook["webhook_id"]]
        assert "secret" not in listed[0]

        started = await http.post("/runs", headers=auth(user), json={
            "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
        run_id = started.json()["run_id"]

        def delivered(kind: str) -> list[dict]:
            return [json.loads(r.body) for r in receiver.received
                    if r.answered < 300 and json.loads(r.body)["type"] == kind]
        await eventually(lambda: asyncio.sleep(0, delivered("gate.opened")), timeout=30)
        # Two failures, then success: three attempts of one delivery, one webhook-id.
        assert [r.answered for r in receiver.received] == [500, 500, 204]
        ids = {r.headers["webhook-id"] for r in receiver.received}
        assert len(ids) == 1
        assert {r.headers["host"] for r in receiver.received} == {url.split("/")[2]}
        verifier = Webhook(hook["secret"])
        for got in receiver.received:
            payload = verifier.verify(got.body, got.headers)
            assert payload["type"] == "gate.opened"
            assert payload["data"]["run_id"] == run_id
            assert payload["data"]["checkpoint_name"] == GATE
        # A tampered body does not verify.
        forged = receiver.received[-1]
        try:
            verifier.verify(forged.body.replace(b"gate.opened", b"gate.forged"), forged.headers)
            raise AssertionError("a tampered body verified")
        except Exception as error:  # noqa: BLE001 - the library's WebhookVerificationError
            assert type(error).__name__ == "WebhookVerificationError"

        decided = await http.post(f"/runs/{run_id}/decisions/{GATE}", headers=auth(user),
                                  json={"decision": "approve", "feedback": "go"})
        assert decided.status_code == 200
        await eventually(lambda: asyncio.sleep(0, delivered("run.finished")), timeout=60)
        decision = delivered("gate.decided")
        assert [d["data"]["decision_by"] for d in decision] == [user]
        assert delivered("run.finished")[0]["data"]["status"] == "completed"
        # Each event once, each with its own id.
        assert len(receiver.received) == 5
        assert len({r.headers["webhook-id"] for r in receiver.received}) == 3

    log = (await http.get(f"/webhooks/{hook['webhook_id']}/deliveries",
                          headers=auth(user))).json()["deliveries"]
    by_type = {d["event_type"]: d for d in log}
    assert set(by_type) == {"gate.opened", "gate.decided", "run.finished"}
    opened = by_type["gate.opened"]
    assert opened["status"] == "delivered" and opened["attempts"] == 3
    assert opened["webhook_id_header"] == next(iter(ids))
    async with pool.acquire() as conn:
        attempts = await conn.fetch(
            "SELECT attempt, status_code FROM webhook_attempts WHERE delivery_id = $1 "
            "ORDER BY attempt", uuid.UUID(opened["delivery_id"]))
    assert [(a["attempt"], a["status_code"]) for a in attempts] == [(1, 500), (2, 500), (3, 204)]


async def test_webhook_refusals_write_nothing_and_delete_stops_it(http, pool):
    user = f"hooks-{uuid.uuid4().hex[:6]}"
    async with pool.acquire() as conn:
        before = await conn.fetchval("SELECT count(*) FROM webhooks")
    bad = [{"url": "ftp://example.com/x", "events": ["gate.opened"]},
           {"url": "javascript:alert(1)", "events": ["gate.opened"]},
           {"url": "file:///etc/passwd", "events": ["gate.opened"]},
           {"url": "http://127.0.0.1/x", "events": []},
           {"url": "http://127.0.0.1/x", "events": ["gate.snoozed"]},
           {"url": "http://127.0.0.1/x", "events": ["gate.opened"], "secret": "hunter2"},
           {"url": "http://127.0.0.1/x", "events": ["gate.opened"], "extra": 1}]
    for body in bad:
        response = await http.post("/webhooks", headers=auth(user), json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"]["code"] == "invalid_request"
    # Server-side request forgery: cloud metadata services, link-local and unusable addresses.
    for url in METADATA_AND_UNUSABLE:
        response = await http.post("/webhooks", headers=auth(user),
                                   json={"url": url, "events": ["gate.opened"]})
        assert response.status_code == 422, (url, response.text)
        assert response.json()["error"]["code"] == "webhook_url_refused"
    stranger = await http.post("/webhooks", headers=auth(user), json={
        "url": "http://127.0.0.1/x", "events": ["gate.opened"], "group_id": str(uuid.uuid4())})
    assert stranger.status_code == 404
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM webhooks") == before

    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    created = await http.post("/webhooks", headers=auth(user), json={
        "url": "https://hooks.example.com/in", "events": ["run.finished"], "secret": secret})
    assert created.status_code == 201 and created.json()["secret"] == secret
    hook_id = created.json()["webhook_id"]
    other = await http.delete(f"/webhooks/{hook_id}", headers=auth("mallory"))
    assert other.status_code == 404
    assert (await http.delete(f"/webhooks/{hook_id}", headers=auth(user))).status_code == 204
    assert (await http.delete(f"/webhooks/{hook_id}", headers=auth(user))).status_code == 404
    assert (await http.get("/webhooks", headers=auth(user))).json()["webhooks"] == []


async def test_group_webhook_hears_expiry_and_the_end_of_a_members_run(http):
    owner, member = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("alice", "bob"))
    group = (await http.post("/groups", json={"name": "Ops"}, headers=auth(owner))).json()
    added = await http.post(f"/groups/{group['group_id']}/members", headers=auth(owner),
                            json={"user": member, "role": "approver"})
    assert added.status_code == 201
    with Receiver() as receiver:
        created = await http.post("/webhooks", headers=auth(owner), json={
            "url": receiver.url, "events": ["gate.expired", "run.finished"],
            "group_id": group["group_id"]})
        assert created.status_code == 201, created.text
        # bob's run in the group; its gate expires in a second and the run fails.
        started = await http.post("/runs", headers=auth(member), json={
            "kind": "validation", "group_id": group["group_id"],
            "input": {"entrepreneur_input": IDEA, "gates": [GATE], "gate_timeout_seconds": 1,
                      "expiry_policy": "fail"}})
        assert started.status_code == 201, started.text
        await eventually(lambda: asyncio.sleep(0, len(receiver.received) >= 2), timeout=60)
        # Nothing else arrives (gate.opened was not asked for): an absence, shown only by
        # waiting a while.
        await asyncio.sleep(0.5)
        types = [json.loads(r.body)["type"] for r in receiver.received]
        assert types == ["gate.expired", "run.finished"]
        Webhook(created.json()["secret"]).verify(receiver.received[0].body,
                                                 receiver.received[0].headers)
        finished = json.loads(receiver.received[1].body)["data"]
        assert finished["owner"] == member and finished["status"] == "failed"


async def test_private_networks_off_refuses_them_at_registration_and_delivery(
        migrated_url, dev_env, pool, task_queue):
    """WAYSTATION_WEBHOOK_PRIVATE_NETWORKS=false (a shared deployment): no loopback or private
    URL is registered, and a webhook registered before the switch gets nothing sent to it."""
    user = f"hooks-{uuid.uuid4().hex[:6]}"
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        webhook_private_networks=False) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        with Receiver() as receiver:
            for url in (receiver.url, receiver.url.replace("127.0.0.1", "localhost"),
                        "http://10.1.2.3/hook", "http://[::1]:9/hook"):
                refused = await http.post("/webhooks", headers=auth(user),
                                          json={"url": url, "events": ["gate.opened"]})
                assert refused.status_code == 422, (url, refused.text)
                assert refused.json()["error"]["code"] == "webhook_url_refused"
            async with pool.acquire() as conn:
                hook = await webhooks_repo.create_webhook(
                    conn, webhook_id=uuid.uuid4(), owner=user, group_id=None,
                    url=receiver.url.replace("127.0.0.1", "localhost"),
                    secret="whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", events=["gate.opened"],
                    most=10)
            started = await http.post("/runs", headers=auth(user), json={
                "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
            assert started.status_code == 201, started.text

            async def given_up() -> list[dict] | None:
                log = (await http.get(f"/webhooks/{hook.id}/deliveries",
                                      headers=auth(user))).json()["deliveries"]
                return log if log and log[0]["status"] == "failed" else None
            log = await eventually(given_up, timeout=30)
            assert receiver.received == []
        async with pool.acquire() as conn:
            attempts = await conn.fetch("SELECT status_code, error FROM webhook_attempts "
                                        "WHERE delivery_id = $1", uuid.UUID(log[0]["delivery_id"]))
        # Refused once, not retried: no retry can change where it would go.
        assert [(a["status_code"], a["error"].split(" (")[0]) for a in attempts] == [
            (None, "refused: localhost resolves to 127.0.0.1 is a loopback or private address")]


async def test_a_secret_sealed_under_a_missing_key_waits_for_it_and_is_delivered(http, pool):
    """Secrets are stored sealed, never in clear. A delivery whose secret the worker cannot
    open (its key left out of WAYSTATION_SECRETS_KEY) is retried, not lost: once the secret
    opens again, the same delivery arrives, signed with the secret the API handed out."""
    user = f"sealed-{uuid.uuid4().hex[:6]}"
    with Receiver() as receiver:
        created = await http.post("/webhooks", headers=auth(user),
                                  json={"url": receiver.url, "events": ["gate.opened"]})
        hook = created.json()
        webhook_id = uuid.UUID(hook["webhook_id"])
        async with pool.acquire() as conn:
            stored = await conn.fetchval("SELECT secret FROM webhooks WHERE id = $1", webhook_id)
            assert stored.startswith(PREFIX) and hook["secret"] not in stored
            assert Settings().secrets_box.open(stored) == hook["secret"]
            # As if sealed under a key since dropped from the setting.
            await conn.execute("UPDATE webhooks SET secret = $2 WHERE id = $1", webhook_id,
                               SecretsBox(new_key()).seal(hook["secret"]))
        await http.post("/runs", headers=auth(user), json={
            "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})

        async def failed_attempt() -> str | None:
            async with pool.acquire() as conn:
                return await conn.fetchval(
                    "SELECT a.error FROM webhook_attempts a JOIN webhook_deliveries d "
                    "ON d.id = a.delivery_id WHERE d.webhook_id = $1", webhook_id)
        error = await eventually(failed_attempt, timeout=30)
        assert error.startswith("SecretUnreadable") and receiver.received == []
        async with pool.acquire() as conn:  # the key is back
            await conn.execute("UPDATE webhooks SET secret = $2 WHERE id = $1", webhook_id,
                               stored)
        await eventually(lambda: asyncio.sleep(0, receiver.received), timeout=30)
        assert Webhook(hook["secret"]).verify(receiver.received[0].body,
                                              receiver.received[0].headers)["type"] == \
            "gate.opened"

    async def delivery_status() -> str | None:
        async with pool.acquire() as conn:
            return await conn.fetchval("SELECT status FROM webhook_deliveries "
                                       "WHERE webhook_id = $1 AND status <> 'pending'",
                                       webhook_id)
    # The worker records the attempt once the receiver has answered.
    assert await eventually(delivery_status, timeout=10) == "delivered"


async def test_reseal_secrets_rotates_the_key_and_seals_clear_ones(http, pool, migrated_url):
    """`waystation reseal-secrets` with a new key first: every secret then opens with the new
    key alone, one stored in clear (before sealing) included; one sealed under a key not in
    the setting is named, left as it is, and fails the command."""
    created = await http.post("/webhooks", headers=auth("rotating"),
                              json={"url": "http://127.0.0.1:9/hook", "events": ["gate.opened"]})
    sealed = created.json()
    clear_secret, lost_secret = "whsec_" + "A" * 32, "whsec_" + "B" * 32
    async with pool.acquire() as conn:
        clear = await webhooks_repo.create_webhook(
            conn, webhook_id=uuid.uuid4(), owner="rotating", group_id=None,
            url="http://127.0.0.1:9/old", secret=clear_secret, events=["gate.opened"], most=10)
        # An A2A push config's token and authentication are sealed as its secret is, and
        # resealed with it.
        tokened = await webhooks_repo.create_webhook(
            conn, webhook_id=uuid.uuid4(), owner="rotating", group_id=None,
            url="http://127.0.0.1:9/a2a", secret=SecretsBox(DEV_SECRETS_KEY).seal(clear_secret),
            events=["gate.opened"], most=10,
            notification_token=SecretsBox(DEV_SECRETS_KEY).seal("opaque token"),
            notification_authorization=SecretsBox(DEV_SECRETS_KEY).seal("Bearer opaque"))
        lost = await webhooks_repo.create_webhook(
            conn, webhook_id=uuid.uuid4(), owner="rotating", group_id=None,
            url="http://127.0.0.1:9/lost", secret=SecretsBox(new_key()).seal(lost_secret),
            events=["gate.opened"], most=10)
    made = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "waystation", "secrets-key"],
        capture_output=True, text=True, check=True)
    fresh = made.stdout.strip()
    rotated = Settings(secrets_key=f"{fresh},{DEV_SECRETS_KEY}")

    async def reseal(key: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "waystation", "reseal-secrets"],
            env={**os.environ, "DATABASE_URL": migrated_url, "WAYSTATION_SECRETS_KEY": key},
            capture_output=True, text=True, timeout=60)

    try:
        first = await reseal(rotated.secrets_key)
        assert first.returncode == 1 and str(lost.id) in first.stderr, first
        again = await reseal(rotated.secrets_key)
        assert "0 sealed under the first key" in again.stdout, again
        async with pool.acquire() as conn:
            stored = {r["id"]: r["secret"] for r in await conn.fetch(
                "SELECT id, secret FROM webhooks WHERE owner = 'rotating'")}
        only_new = SecretsBox(fresh)
        assert only_new.open(stored[uuid.UUID(sealed["webhook_id"])]) == sealed["secret"]
        assert only_new.open(stored[clear.id]) == clear_secret
        assert stored[clear.id].startswith(PREFIX)
        assert stored[lost.id] == lost.secret
        async with pool.acquire() as conn:
            token, authorization = await conn.fetchrow(
                "SELECT notification_token, notification_authorization FROM webhooks "
                "WHERE id = $1", tokened.id)
        assert only_new.open(token) == "opaque token"
        assert only_new.open(authorization) == "Bearer opaque"
    finally:  # later tests' workers hold the dev key only
        async with pool.acquire() as conn:
            await conn.execute("DELETE FROM webhooks WHERE id = $1", lost.id)
        back = await reseal(f"{DEV_SECRETS_KEY},{fresh}")
        assert back.returncode == 0, back


def test_a_settings_copy_with_another_key_seals_and_opens_with_that_key():
    """The box follows the key it is read from: a copy of the settings with a new key neither
    seals under nor opens with the original's key, and the original keeps its own."""
    dev = Settings(WAYSTATION_ENV="dev")
    sealed = dev.secrets_box.seal("s3cret")
    moved = dev.model_copy(update={"secrets_key": new_key()})
    assert SecretsBox(moved.secrets_key).open(moved.secrets_box.seal("y")) == "y"
    assert dev.secrets_box.open(sealed) == "s3cret"
    with pytest.raises(SecretUnreadable):
        moved.secrets_box.open(sealed)


async def test_the_recorder_sends_first_and_the_workflow_finds_it_delivered(http, pool, dev_env):
    """A gate's webhook leaves from the recorder that committed it, before its notification
    workflow starts (issue 31: one POST after the commit, not a workflow start and task); the
    workflow then finds it delivered and sends nothing."""
    user = f"first-{uuid.uuid4().hex[:6]}"
    with Receiver() as receiver:
        created = await http.post("/webhooks", headers=auth(user),
                                  json={"url": receiver.url, "events": ["gate.opened"]})
        assert created.status_code == 201, created.text
        started = await http.post("/runs", headers=auth(user), json={
            "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
        run_id = uuid.UUID(started.json()["run_id"])

        async def delivered() -> asyncpg.Record | None:
            async with pool.acquire() as conn:
                return await conn.fetchrow(
                    "SELECT id, event_key, attempts FROM webhook_deliveries "
                    "WHERE run_id = $1 AND status = 'delivered'", run_id)
        delivery = await eventually(delivered, timeout=30)
        assert delivery["attempts"] == 1
        handle = dev_env.client.get_workflow_handle(f"webhooks-{run_id}-{delivery['event_key']}",
                                                     result_type=NotificationResult)
        await started_workflow(handle)
        assert (await handle.result()).statuses == {}  # nothing left to deliver
        history = await handle.fetch_history()
        # One local activity: the pending deliveries' lookup, which found none; no send.
        assert sum(e.HasField("marker_recorded_event_attributes") for e in history.events) == 1
        assert not any(e.HasField("activity_task_scheduled_event_attributes")
                       for e in history.events)
    assert len(receiver.received) == 1
