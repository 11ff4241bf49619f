"""People around a gate, on the time-skipping server with the real read model: quorum votes,
delegation, typed answers, reminders and escalation (the rules come in the run's memo, as the
API sets them from `POST /runs` "gates" and the kind's defaults)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)

from tests.helpers import eventually, new_validation_run
from tests.webhook_receiver import Receiver
from waystation.activities.agents import backend_named
from waystation.activities.decision_mail import MailSettings
from waystation.contracts.gate_policy import GATE_POLICY_MEMO
from waystation.contracts.refusals import (
    ALREADY_VOTED,
    INVALID_ANSWER,
    INVALID_DELEGATION,
    NOT_ALLOWED,
)
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.models import ValidationRunInput
from waystation.kinds.validation.workflow import ValidationRun
from waystation.persistence import events as events_repo
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence.decision_mail import put_contact
from waystation.persistence.groups import create_group, put_member
from waystation.persistence.models import RunRow
from waystation.persistence.webhooks import create_webhook
from waystation.worker import build_worker
from waystation.workflows.gate_rules import DecisionInput, DelegateInput

GATE = "approve_founders_brief"



async def start(client: Client, pool: asyncpg.Pool, task_queue: str,
                gates: dict[str, Any]) -> tuple[ValidationRunInput, WorkflowHandle]:
    arg = await new_validation_run(pool)
    arg = arg.model_copy(update={"input": arg.input.model_copy(update={"gates": [GATE]})})
    handle = await client.start_workflow(
        ValidationRun.run, arg, id=VALIDATION.workflow_id(arg.run_id), task_queue=task_queue,
        memo={GATE_POLICY_MEMO: gates})
    await wait_pending(pool, arg)
    return arg, handle


async def wait_pending(pool: asyncpg.Pool, arg: ValidationRunInput):
    async def pending():
        async with pool.acquire() as conn:
            gates = await gates_repo.list_run_gates(conn, arg.run_id)
        return gates[-1] if gates and gates[-1].status == "pending" else None
    return await eventually(pending)


async def settle(pool: asyncpg.Pool, handle: WorkflowHandle) -> None:
    """End a test's run with no activity outstanding (the module's time-skipping server stops
    skipping time for the next test while one is): let it finish, or end it at a gate."""
    run_id = uuid.UUID(handle.id.removeprefix(VALIDATION.workflow_id_prefix))

    async def quiet() -> RunRow | None:
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, run_id)
        return run if run is not None and (run.status in ("completed", "failed", "canceled")
                                           or run.hitl_state is not None) else None
    run = await eventually(quiet, timeout=60)
    if run.hitl_state is not None:
        await handle.terminate()
    else:  # its end is recorded; the workflow returns right after
        with contextlib.suppress(WorkflowFailureError):
            await handle.result()


async def vote(handle: WorkflowHandle, who: str, option: str = "approve", **kw: Any):
    return await handle.execute_update(ValidationRun.decide, DecisionInput(
        checkpoint_name=GATE, decision=option, decided_by=who, **kw))


async def refused(call, error_type: str) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as refusal:
        await call
    assert refusal.value.cause.type == error_type, refusal.value.cause
    return refusal.value.cause.message


async def gate_state(pool: asyncpg.Pool, arg: ValidationRunInput):
    async with pool.acquire() as conn:
        gate = (await gates_repo.list_run_gates(conn, arg.run_id))[0]
        votes = (await gates_repo.list_audits(conn, [gate.id]))[gate.id].votes
        events = await events_repo.list_events(conn, arg.run_id, after_seq=0, limit=1000)
    return gate, votes, [e for e in events if e.type.startswith("gate.")]


async def test_two_of_three_quorum_counts_votes_once_and_a_rejection_rejects(
        time_env, pool, worker, task_queue):
    rule = {"*": {"quorum": 2, "decider_users": ["bob", "carol"]}}
    arg, handle = await start(time_env.client, pool, task_queue, rule)
    first = await vote(handle, "bob", feedback="looks right")
    assert first.status == "pending"
    await refused(vote(handle, "bob"), ALREADY_VOTED)  # a second vote by the same person
    gate, votes, _ = await gate_state(pool, arg)
    assert gate.status == "pending" and gate.quorum == 2 and gate.decider_users == ["bob", "carol"]
    assert [(v.voter, v.option, v.digest) for v in votes] == [("bob", "approve", gate.digest)]
    second = await vote(handle, "carol")
    assert second.status == "approved" and second.decided_by == "carol"
    gate, votes, events = await gate_state(pool, arg)
    assert gate.status == "approved" and [v.voter for v in votes] == ["bob", "carol"]
    assert [e.type for e in events] == ["gate.opened", "gate.voted", "gate.decided"]
    assert events[-1].output["votes"] == ["bob", "carol"]
    await settle(pool, handle)

    # A second run: one rejection rejects, whatever the approvals.
    arg, handle = await start(time_env.client, pool, task_queue, rule)
    await vote(handle, "alice")
    rejected = await vote(handle, "bob", "reject", feedback="the brief is thin")
    assert rejected.status == "rejected"
    gate, votes, _ = await gate_state(pool, arg)
    assert gate.status == "rejected" and gate.decision_by == "bob"
    assert [(v.voter, v.option) for v in votes] == [("alice", "approve"), ("bob", "reject")]
    await settle(pool, handle)


async def test_delegated_vote_is_cast_by_the_delegate_and_refusals_write_nothing(
        time_env, pool, worker, task_queue):
    arg, handle = await start(time_env.client, pool, task_queue, {"*": {"quorum": 2}})
    delegate = ValidationRun.delegate
    msg = await refused(handle.execute_update(delegate, DelegateInput(
        checkpoint_name=GATE, from_user="alice", to_user="alice")), INVALID_DELEGATION)
    assert "yourself" in msg
    await handle.execute_update(delegate, DelegateInput(
        checkpoint_name=GATE, from_user="alice", to_user="dan"))
    await refused(handle.execute_update(delegate, DelegateInput(
        checkpoint_name=GATE, from_user="alice", to_user="erin")), ALREADY_VOTED)
    await refused(handle.execute_update(delegate, DelegateInput(
        checkpoint_name=GATE, from_user="dan", to_user="alice")), INVALID_DELEGATION)
    # alice handed her vote on: she cannot cast it herself any more.
    await refused(vote(handle, "alice"), ALREADY_VOTED)
    # dan holds only alice's vote (the API sends for_self=False for him).
    held = await vote(handle, "dan", for_self=False, answer=None)
    assert held.status == "pending"
    await refused(vote(handle, "dan", for_self=False), ALREADY_VOTED)
    await refused(vote(handle, "frank", for_self=False), NOT_ALLOWED)
    decided = await vote(handle, "bob")
    assert decided.status == "approved"
    gate, votes, events = await gate_state(pool, arg)
    assert [(v.voter, v.on_behalf_of) for v in votes] == [("dan", "alice"), ("bob", "bob")]
    assert [e.type for e in events] == ["gate.opened", "gate.delegated", "gate.voted",
                                        "gate.decided"]
    async with pool.acquire() as conn:
        handed = (await gates_repo.list_audits(conn, [gate.id]))[gate.id].delegations
    assert [(d.from_user, d.to_user) for d in handed] == [("alice", "dan")]
    await settle(pool, handle)


BUDGET = {"type": "object", "required": ["budget_usd"], "additionalProperties": False,
          "properties": {"budget_usd": {"type": "integer", "minimum": 100},
                         "channels": {"type": "array", "items": {"type": "string"}}}}


async def test_typed_answer_is_validated_with_its_path_and_used(
        time_env, pool, worker, task_queue):
    arg, handle = await start(time_env.client, pool, task_queue, {GATE: {
        "answer_schema": BUDGET, "answer_options": {"approve": "optional"}}})
    gate = await wait_pending(pool, arg)
    assert gate.answer_schema == BUDGET
    assert {o.value: o.answer for o in gate.options}["approve"] == "optional"
    msg = await refused(vote(handle, "alice", answer={"budget_usd": 50}), INVALID_ANSWER)
    assert msg.startswith("answer.budget_usd:")
    msg = await refused(vote(handle, "alice", answer={"budget_usd": 500, "channels": [1]}),
                        INVALID_ANSWER)
    assert msg.startswith("answer.channels[0]:")
    msg = await refused(vote(handle, "alice", "reject", answer={"budget_usd": 500}),
                        INVALID_ANSWER)
    assert "takes none" in msg
    # Refused answers wrote nothing.
    _, votes, events = await gate_state(pool, arg)
    assert votes == [] and [e.type for e in events] == ["gate.opened"]
    decided = await vote(handle, "alice", answer={"budget_usd": 500, "channels": ["email"]})
    assert decided.status == "approved" and decided.answer["budget_usd"] == 500
    gate, votes, events = await gate_state(pool, arg)
    assert gate.answer == {"budget_usd": 500, "channels": ["email"]}
    assert events[-1].output["answer"] == gate.answer and votes[0].answer == gate.answer
    await settle(pool, handle)


async def test_with_a_quorum_one_approver_edits_and_the_others_approve_the_edits(
        time_env, pool, worker, task_queue):
    arg, handle = await start(time_env.client, pool, task_queue, {GATE: {
        "quorum": 2, "answer_schema": BUDGET, "answer_options": {"approve": "optional"}}})
    await vote(handle, "bob", answer={"budget_usd": 300})
    decided = await vote(handle, "carol")
    assert decided.status == "approved" and decided.decided_by == "carol"
    assert decided.answer == {"budget_usd": 300}
    gate, votes, _ = await gate_state(pool, arg)
    assert gate.answer == {"budget_usd": 300}
    assert [(v.voter, v.answer) for v in votes] == [("bob", {"budget_usd": 300}),
                                                    ("carol", None)]
    await settle(pool, handle)


async def test_free_text_answer_is_required_when_the_gate_asks_for_one(
        time_env, pool, worker, task_queue):
    arg, handle = await start(time_env.client, pool, task_queue, {"*": {
        "answer_schema": {"type": "string", "minLength": 3}}})
    await refused(vote(handle, "alice"), INVALID_ANSWER)  # approving needs the answer
    await refused(vote(handle, "alice", answer="ok"), INVALID_ANSWER)
    assert (await vote(handle, "alice", answer="ship the pilot")).status == "approved"
    await settle(pool, handle)


async def test_reminders_and_escalation_fire_while_the_gate_waits(
        own_time_env, pool, task_queue):
    # Days skipped on a server of its own (tests/conftest.py, own_time_env).
    async with build_worker(own_time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline")):
        arg, handle = await start(own_time_env.client, pool, task_queue, {"*": {
            "remind_every": "P2D", "remind_before_expiry": "PT12H",
            "escalate_after": "P3D", "escalate_to_roles": ["director"]}})
        # Seven days to expiry: reminders on days 2, 4, 6 and 6.5, the escalation on day 3.
        await own_time_env.sleep(timedelta(days=5))

        async def noticed() -> list | None:
            _, _, events = await gate_state(pool, arg)
            types = [e.type for e in events]
            return events if types.count("gate.reminded") == 2 and "gate.escalated" in types \
                else None
        events = await eventually(noticed)
        assert [e.type for e in events] == ["gate.opened", "gate.reminded", "gate.escalated",
                                            "gate.reminded"]
        assert [e.output["number"] for e in events if e.type == "gate.reminded"] == [1, 2]
        gate, _, _ = await gate_state(pool, arg)
        assert gate.decider_roles == ["owner", "approver", "director"]
        assert gate.reminders_sent == 2 and gate.escalated_at is not None
        assert gate.status == "pending"
        assert (await vote(handle, "alice")).status == "approved"
        _, _, events = await gate_state(pool, arg)
        assert events[-1].type == "gate.decided"
        await settle(pool, handle)


async def test_reminders_and_escalation_mail_the_deciders_and_call_webhooks(
        own_time_env, pool, task_queue, mailbox):
    """Group of alice (owner), bob (approver), carol (director), two approvals needed: a day
    in, both deciders are reminded; bob votes; at 36 h the request escalates to directors
    (carol is mailed); at 48 h those who have not voted (alice, carol) are reminded again.
    A webhook hears of each reminder and the escalation."""
    box, port = mailbox
    tag = uuid.uuid4().hex[:6]
    alice, bob, carol = (f"{n}-{tag}" for n in ("alice", "bob", "carol"))
    group_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_group(conn, group_id=group_id, name="Board", creator=alice)
        for user, role in ((bob, "approver"), (carol, "director")):
            await put_member(conn, group_id=group_id, user=user, role=role, added_by=alice)
        for user in (alice, bob, carol):
            await put_contact(conn, user, f"{user}@example.com")
    mail = MailSettings(smtp_url=f"smtp://127.0.0.1:{port}", sender="ws@example.com",
                        link_base="http://console.example", link_secret="s" * 40)

    def mails() -> list[tuple[str, str]]:
        return sorted((m["To"].split("-")[0], m["Subject"].split(":")[0]) for m in box.messages)

    async def mailed(count: int) -> None:
        await eventually(lambda: asyncio.sleep(0, len(box.messages) >= count), timeout=30)
        # Nothing more arrives: an absence, shown only by waiting a while.
        await asyncio.sleep(0.3)

    with Receiver() as receiver:
        async with pool.acquire() as conn:
            await create_webhook(conn, webhook_id=uuid.uuid4(), owner=alice, group_id=None,
                                 url=receiver.url, secret="whsec_" + "A" * 32,
                                 events=["gate.reminded", "gate.escalated"], most=10)
        async with build_worker(own_time_env.client, pool, task_queue=task_queue,
                                backend=backend_named("offline"), mail=mail):
            arg = await new_validation_run(pool, owner=alice)
            async with pool.acquire() as conn:
                await conn.execute("UPDATE runs SET group_id = $1 WHERE id = $2", group_id,
                                   arg.run_id)
            arg = arg.model_copy(update={"input": arg.input.model_copy(
                update={"gates": [GATE]})})
            handle = await own_time_env.client.start_workflow(
                ValidationRun.run, arg, id=VALIDATION.workflow_id(arg.run_id),
                task_queue=task_queue, memo={GATE_POLICY_MEMO: {"*": {
                    "quorum": 2, "remind_every": "P1D", "escalate_after": "PT36H",
                    "escalate_to_roles": ["director"]}}})
            await wait_pending(pool, arg)
            await mailed(2)
            await own_time_env.sleep(timedelta(hours=25))
            await mailed(4)
            assert mails() == [("alice", "Decision needed"), ("alice", "Reminder"),
                               ("bob", "Decision needed"), ("bob", "Reminder")]
            assert (await vote(handle, bob)).status == "pending"
            await own_time_env.sleep(timedelta(hours=24))
            await mailed(7)
            assert mails() == [("alice", "Decision needed"), ("alice", "Reminder"),
                               ("alice", "Reminder"), ("bob", "Decision needed"),
                               ("bob", "Reminder"), ("carol", "Decision needed"),
                               ("carol", "Reminder")]
            assert (await vote(handle, carol)).status == "approved"
            await eventually(lambda: asyncio.sleep(0, len(receiver.received) >= 3), timeout=30)
            heard = [json.loads(r.body) for r in receiver.received]
            assert [(h["type"], h["data"].get("number")) for h in heard] == [
                ("gate.reminded", 1), ("gate.escalated", 1), ("gate.reminded", 2)]
            assert heard[1]["data"]["decider_roles"] == ["owner", "approver", "director"]
            await settle(pool, handle)
