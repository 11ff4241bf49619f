"""Linking a Slack user by the e-mail address Slack confirmed (WAYSTATION_SLACK_LINK_BY), on the
real stack with the stand-in's `users.info`: only where Waystation's users are named by the
identity provider's verified e-mail, and only to someone Waystation knows."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest_asyncio

from tests.integration.test_slack import (
    Stack,
    _nth,
    auth,
    auth_service,
    pending,
    slack_stack,
    start_validation,
)
from tests.slack_client import SlackPerson
from tests.slack_stub import Message
from waystation.testing import eventually

# Users named by the identity provider's verified e-mail (never contacted here: nobody signs
# in through it; tokens of this installation name the same users).
BY_EMAIL = {"oidc_issuer": "http://127.0.0.1:9/idp", "oidc_client_id": "waystation",
            "oidc_user_claim": "email"}


@pytest_asyncio.fixture
async def by_email(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[Stack]:
    async with slack_stack(migrated_url, dev_env, pool, task_queue, slack_link_by="email",
                           **BY_EMAIL) as stack:
        yield stack


def person(slack: Stack, name: str, email: str, *, confirmed: bool = True) -> SlackPerson:
    """A Slack user of the workspace (a new id: links outlive a test) whose profile holds
    `email`."""
    slack_id = f"{name}{uuid.uuid4().hex[:6].upper()}"
    slack.stub.emails[slack_id] = (email, confirmed)
    return slack.person(slack_id)


async def group_gate(slack: Stack, owner: str,
                     approvers: list[str]) -> tuple[str, str, Message]:
    """A validation run of `owner`'s group, whose approvers are `approvers`: the run, its
    pending request's id and the message showing it."""
    http = slack.http
    group = (await http.post("/groups", json={"name": "Board"},
                             headers=auth(owner))).json()["group_id"]
    for who in approvers:
        added = await http.post(f"/groups/{group}/members", headers=auth(owner),
                                json={"user": who, "role": "approver"})
        assert added.status_code in (200, 201), added.text
    run_id = await start_validation(http, owner, group_id=group)
    gate = await pending(http, run_id, owner)
    return run_id, gate["request_id"], await slack.message_for(gate["request_id"])


async def told(slack: Stack, who: SlackPerson, message: Message, option: str = "approve") -> str:
    """What the ephemeral answer to `who`'s click says."""
    before = len(slack.stub.ephemerals)
    assert (await who.click(message, option)).status_code == 200
    said = await eventually(lambda: _nth(slack.stub.ephemerals, before))
    assert said["user"] == who.slack_id, said
    return said["text"]


async def links_of(slack: Stack, slack_id: str) -> list[tuple[str, object]]:
    async with slack.pool.acquire() as conn:
        rows = await conn.fetch("SELECT user_name, api_key_id FROM slack_users "
                                "WHERE slack_user = $1", slack_id)
    return [(r["user_name"], r["api_key_id"]) for r in rows]


def users_info_calls(slack: Stack) -> int:
    return sum(1 for method, _ in slack.stub.calls if method == "users.info")


def emails() -> dict[str, str]:
    return {n: f"{n}-{uuid.uuid4().hex[:6]}@example.com" for n in ("alice", "bob", "carol")}


async def test_a_click_by_an_unlinked_decider_links_them_by_their_confirmed_email(
        by_email: Stack):
    slack, http = by_email, by_email.http
    p = emails()
    run_id, request_id, message = await group_gate(slack, p["alice"], [p["bob"]])
    bob = person(slack, "UBOBMAIL", p["bob"])

    assert (await bob.click(message, "approve")).status_code == 200
    await slack.updated(message, f"approved by {p['bob']}")
    assert await slack.written(request_id) == ("approved", 1)
    audit = (await http.get(f"/runs/{run_id}/decisions", headers=auth(p["bob"]))).json()
    assert audit["decisions"][0]["decided_by"] == p["bob"]
    # Linked without a key: the link is kept, and the next click asks Slack nothing more.
    assert await links_of(slack, bob.slack_id) == [(p["bob"], None)]
    asked = users_info_calls(slack)
    _, _, again = await group_gate(slack, p["alice"], [])
    assert "not one you can see" in await told(slack, bob, again)
    assert users_info_calls(slack) == asked
    # Membership ends what the link may decide: removed since the message was posted.
    run_id, request_id, message = await group_gate(slack, p["alice"], [p["bob"]])
    group = (await http.get(f"/runs/{run_id}", headers=auth(p["alice"]))).json()["group_id"]
    removed = await http.delete(f"/groups/{group}/members/{p['bob']}", headers=auth(p["alice"]))
    assert removed.status_code in (200, 204), removed.text
    assert "not one you can see" in await told(slack, bob, message)
    assert await slack.written(request_id) == ("pending", 0)


async def test_an_email_slack_does_not_vouch_for_links_nobody_and_writes_nothing(
        by_email: Stack):
    slack, stub = by_email, by_email.stub
    p = emails()
    known = f"dan-{uuid.uuid4().hex[:6]}@example.com"  # someone here: holds an API key
    made = await slack.http.post("/api-keys", headers=auth(known), json={"name": "mine"})
    assert made.status_code == 201, made.text
    _, request_id, message = await group_gate(slack, p["alice"], [p["bob"], p["carol"]])

    unconfirmed = person(slack, "UCAROL", p["carol"], confirmed=False)
    unknown = person(slack, "USTRANGER", f"nobody-{uuid.uuid4().hex[:6]}@example.com")
    # Not a user of the workspace: users.info answers user_not_found.
    not_in_slack = SlackPerson(slack.http, stub, f"UGONE{uuid.uuid4().hex[:6]}")
    outsider = person(slack, "UDAN", known)  # known here, but not in the run's group
    for who, why in ((unconfirmed, "not confirmed your e-mail"),
                     (unknown, "no Waystation user is named"),
                     (not_in_slack, "does not show your user"),
                     (outsider, "not one you can see")):
        assert why in await told(slack, who, message), who.slack_id
    for who in (unconfirmed, unknown, not_in_slack):
        assert await links_of(slack, who.slack_id) == []

    # The app without users:read.email: Slack leaves the address out; without users:read,
    # Slack refuses the method (missing_scope). Either way, nothing is linked.
    bob = person(slack, "UBOBMAIL", p["bob"])
    stub.scopes.discard("users:read.email")
    assert "users:read.email" in await told(slack, bob, message)
    # (Another Slack user: Slack's answer about bob is kept a few seconds.)
    bob_again = person(slack, "UBOBMAIL", p["bob"])
    stub.scopes.discard("users:read")
    said = await told(slack, bob_again, message)
    assert "may not read who you are" in said and "users:read.email" in said
    assert ("users.info", 200) in stub.calls
    assert await links_of(slack, bob.slack_id) == await links_of(slack, bob_again.slack_id) == []
    assert await slack.written(request_id) == ("pending", 0)


async def test_the_command_setting_ignores_emails(migrated_url, dev_env, pool, task_queue):
    """The default setting, with users named by e-mail all the same: Slack is not asked."""
    async with slack_stack(migrated_url, dev_env, pool, task_queue, **BY_EMAIL) as slack:
        p = emails()
        _, request_id, message = await group_gate(slack, p["alice"], [p["bob"]])
        bob = person(slack, "UBOBMAIL", p["bob"])
        assert "not linked" in await told(slack, bob, message)
        assert users_info_calls(slack) == 0
        assert await links_of(slack, bob.slack_id) == []
        assert await slack.written(request_id) == ("pending", 0)


async def test_an_erased_user_s_email_link_is_gone(by_email: Stack):
    slack, http, stub = by_email, by_email.http, by_email.stub
    p = emails()
    _, request_id, message = await group_gate(slack, p["alice"], [p["bob"]])
    bob = person(slack, "UBOBMAIL", p["bob"])
    # `/waystation link` links by the e-mail too, and says to whom.
    before = len(stub.ephemerals)
    assert (await bob.command("link")).status_code == 200
    said = await eventually(lambda: _nth(stub.ephemerals, before))
    assert f"linked to the Waystation user {p['bob']}" in said["text"], said
    assert await links_of(slack, bob.slack_id) == [(p["bob"], None)]

    erased = await http.post("/admin/erasure", headers=auth_service(), json={"user": p["bob"]})
    assert erased.status_code == 202, erased.text
    assert await links_of(slack, bob.slack_id) == []
    # Slack still vouches for the address, but it names nobody here any more.
    assert "no Waystation user is named" in await told(slack, bob, message)
    assert await links_of(slack, bob.slack_id) == []
    assert await slack.written(request_id) == ("pending", 0)


async def test_both_offers_the_one_time_link_when_the_email_does_not_link(
        migrated_url, dev_env, pool, task_queue):
    async with slack_stack(migrated_url, dev_env, pool, task_queue, slack_link_by="both",
                           **BY_EMAIL) as slack:
        p = emails()
        carol = person(slack, "UCAROL", p["carol"], confirmed=False)
        linked = await carol.link_to(auth(p["carol"]))  # the one-time link, opened
        assert linked.status_code == 200 and linked.json()["user"] == p["carol"], linked.text
        said = slack.stub.ephemerals[-1]["text"]
        assert "not confirmed your e-mail" in said and "/slack/link/" in said
        # A click by an unlinked user is told both ways.
        _, request_id, message = await group_gate(slack, p["alice"], [p["bob"]])
        stranger = person(slack, "USTRANGER", f"nobody-{uuid.uuid4().hex[:6]}@example.com")
        said = await told(slack, stranger, message)
        assert "no Waystation user is named" in said and "/waystation link" in said
        assert await slack.written(request_id) == ("pending", 0)


async def test_a_flood_of_clicks_asks_slack_once_and_counts_against_the_slack_user(
        migrated_url, dev_env, pool, task_queue):
    """users.info is asked once for clicks within a few seconds (at the same moment too), and
    each ask counts as a write of the Slack user: over the limit, told so, Slack not asked."""
    async with slack_stack(migrated_url, dev_env, pool, task_queue, slack_link_by="email",
                           writes_per_minute=4, **BY_EMAIL) as slack:
        stub = slack.stub
        alice = f"alice-{uuid.uuid4().hex[:6]}@example.com"
        run_id = await start_validation(slack.http, alice)  # alice's one write
        gate = await pending(slack.http, run_id, alice)
        message = await slack.message_for(gate["request_id"])
        stranger = person(slack, "USTRANGER", f"nobody-{uuid.uuid4().hex[:6]}@example.com")
        before = len(stub.ephemerals)
        clicks = await asyncio.gather(*(stranger.click(message, "approve") for _ in range(3)))
        assert [c.status_code for c in clicks] == [200] * 3
        said = await eventually(lambda: _nth(stub.ephemerals, before + 2))
        assert "no Waystation user is named" in said["text"], said
        assert "no Waystation user is named" in await told(slack, stranger, message)
        assert users_info_calls(slack) == 1
        # The fifth ask in the minute: too many writes of this Slack user.
        assert "too many writes" in await told(slack, stranger, message)
        assert users_info_calls(slack) == 1
        assert await links_of(slack, stranger.slack_id) == []
        assert await slack.written(gate["request_id"]) == ("pending", 0)


async def test_slack_rate_limiting_users_info_is_told_and_waited_out(by_email: Stack):
    """users.info answered 429 (its tier spent): the person is told when to try again, in an
    ephemeral message; Slack is not asked again before its Retry-After."""
    slack, stub = by_email, by_email.stub
    p = emails()
    _, request_id, message = await group_gate(slack, p["alice"], [p["bob"]])
    bob = person(slack, "UBOBMAIL", p["bob"])
    stub.method_limits["users.info"] = 0
    stub.retry_after = 30
    for _ in range(2):
        said = await told(slack, bob, message)
        assert "Slack is answering too many requests; try again in 30 s" in said, said
    assert [s for m, s in stub.calls if m == "users.info"] == [429]
    assert await links_of(slack, bob.slack_id) == []
    assert await slack.written(request_id) == ("pending", 0)
