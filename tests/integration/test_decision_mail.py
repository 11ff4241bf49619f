"""Email to deciders: an SMTP server the test starts (aiosmtpd) receives the mails, and a
mailed link shows the request and decides it once."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from email.message import Message

import httpx
import pytest_asyncio

from tests.helpers import IDEA, eventually, started_workflow
from waystation.activities.agents import backend_named
from waystation.activities.decision_mail import DecisionMailResult, MailSettings
from waystation.api.auth import issue_token
from waystation.settings import Settings
from waystation.testing import InProcessApi
from waystation.worker import build_worker

SECRET = "mail-secret-0123456789-0123456789-abcdef"
GATE = "approve_founders_brief"
LINK = re.compile(r"(http://\S+/decide-link/(\S+))")


@pytest_asyncio.fixture
async def http(migrated_url, dev_env, pool, task_queue,
               mailbox) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(database_url=migrated_url, jwt_secret=SECRET,
                        temporal_task_queue=task_queue,
                        temporal_address=dev_env.client.service_client.config.target_host)
    api = InProcessApi(settings)
    await api.start()
    mail = MailSettings(smtp_url=f"smtp://127.0.0.1:{mailbox[1]}", sender="ws@example.com",
                        link_base=api.url, link_secret=SECRET, link_ttl=timedelta(hours=1))
    async with build_worker(dev_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline"), mail=mail):
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as client:
            yield client
        await api.stop()


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}


def link_in(message: Message) -> tuple[str, str]:
    found = LINK.search(message.get_payload(decode=True).decode())  # type: ignore[union-attr]
    assert found, message.as_string()
    return found.group(1), found.group(2)


async def test_mailed_link_decides_the_request_once(http, pool, mailbox, dev_env):
    box = mailbox[0]
    tag = uuid.uuid4().hex[:6]
    alice, bob, carol = (f"{n}-{tag}" for n in ("alice", "bob", "carol"))
    for user in (alice, bob, carol):
        put = await http.put("/me/contact", headers=auth(user),
                             json={"email": f"{user}@example.com"})
        assert put.status_code == 200, put.text
    assert (await http.put("/me/contact", headers=auth(alice),
                           json={"email": "not-an-address"})).status_code == 422
    group = (await http.post("/groups", json={"name": "Board"}, headers=auth(alice))).json()
    for user, role in ((bob, "approver"), (carol, "viewer")):
        await http.post(f"/groups/{group['group_id']}/members", headers=auth(alice),
                        json={"user": user, "role": role})
    started = await http.post("/runs", headers=auth(alice), json={
        "kind": "validation", "group_id": group["group_id"],
        "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
    run_id = started.json()["run_id"]

    # The owner and the approver are mailed; the viewer is not.
    await eventually(lambda: asyncio.sleep(0, len(box.messages) >= 2), timeout=60)
    # No third mail (the viewer's) follows: an absence, shown only by waiting a while.
    await asyncio.sleep(0.5)
    assert sorted(m["To"] for m in box.messages) == sorted(
        [f"{alice}@example.com", f"{bob}@example.com"])
    # Both went from the recorder that wrote the gate, at once (issue 31); the mail's
    # workflow, started after them, found no one left to write to.
    async with pool.acquire() as conn:
        request_id = await conn.fetchval("SELECT id FROM hitl_requests WHERE run_id = $1",
                                         uuid.UUID(run_id))
    mailing = dev_env.client.get_workflow_handle(f"decision-mail-{request_id}",
                                                 result_type=DecisionMailResult)
    await started_workflow(mailing)
    assert (await mailing.result()).sent == 0
    mail = box.to(f"{bob}@example.com")[0]
    assert mail["Subject"].startswith("Decision needed")
    url, token = link_in(mail)

    # Anyone holding the link sees the request (no bearer token needed).
    shown = await http.get(url.removeprefix(str(http.base_url).rstrip("/")))
    assert shown.status_code == 200, shown.text
    assert shown.json()["decide_as"] == bob
    assert shown.json()["request"]["checkpoint_name"] == GATE
    path = f"/decide-link/{token}"

    # Tampered links: 403, nothing decided.
    for bad in (token[:-1] + ("A" if token[-1] != "A" else "B"), uuid.uuid4().hex + "." + "x" * 43,
                "garbage", token[:-1] + "é"):
        for method in ("GET", "POST"):
            refused = await http.request(method, f"/decide-link/{bad}",
                                         json={"decision": "approve"})
            assert refused.status_code == 403, (bad, refused.text)
            assert refused.json()["error"]["code"] == "invalid_link"
    # A refused answer does not spend the link.
    unknown = await http.post(path, json={"decision": "maybe"})
    assert unknown.status_code == 422

    decided = await http.post(path, json={"decision": "approve", "feedback": "by mail"})
    assert decided.status_code == 200, decided.text
    assert decided.json()["decided_by"] == bob and decided.json()["feedback"] == "by mail"
    for method in ("GET", "POST"):
        again = await http.request(method, path, json={"decision": "approve"})
        assert again.status_code == 403 and again.json()["error"]["code"] == "link_used"

    # The owner's own link now finds nothing pending.
    _, alice_token = link_in(box.to(f"{alice}@example.com")[0])
    late = await http.post(f"/decide-link/{alice_token}", json={"decision": "reject"})
    assert late.status_code == 409
    async with pool.acquire() as conn:
        await conn.execute("UPDATE decision_links SET expires_at = now() - interval '1 second' "
                           "WHERE user_name = $1", alice)
        decisions = await conn.fetch("SELECT decision, decision_by FROM hitl_requests "
                                     "WHERE run_id = $1", uuid.UUID(run_id))
    expired = await http.get(f"/decide-link/{alice_token}")
    assert expired.status_code == 403 and expired.json()["error"]["code"] == "link_expired"
    assert [(d["decision"], d["decision_by"]) for d in decisions] == [("approve", bob)]
