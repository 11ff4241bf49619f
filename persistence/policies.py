"""Repository functions for decision policies, their versions and their verdicts
(migrations 073, 074)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from waystation.contracts.decision_policies import (
    PolicyDecision,
    PolicyMode,
    PolicyRun,
    PolicyVerdict,
)
from waystation.persistence.models import Row
from waystation.persistence.queries import sql


class PolicyVersion(Row):
    """What a version of a policy says (all of it, so a version can be read alone)."""

    kind: str
    checkpoint_name: str | None
    project_id: str | None
    condition: str
    decision: PolicyDecision
    mode: PolicyMode


class PolicyRow(PolicyVersion):
    id: UUID
    name: str
    owner: str
    group_id: UUID | None
    version: int
    created_by: str
    created_at: datetime
    updated_at: datetime
    # Shadow mode: the people's decisions it was compared with, and how many it matched.
    compared: int = 0
    agreed: int = 0


class ApplicablePolicy(Row):
    id: UUID
    name: str
    version: int
    condition: str
    decision: PolicyDecision
    mode: PolicyMode


class PastRequest(Row):
    id: UUID
    run_id: UUID
    checkpoint_name: str
    options: list[dict[str, Any]]
    recommended_option: str | None
    context: dict[str, Any]
    status: str
    decision: str | None
    decision_by: str | None
    created_at: datetime
    kind: str
    input: dict[str, Any]
    owner: str
    group_id: UUID | None
    project_id: str | None
    cost_usd: float


async def create_policy(conn: asyncpg.Connection, *, policy_id: UUID, name: str, owner: str,
                        group_id: UUID | None, version: PolicyVersion) -> None:
    async with conn.transaction():
        await conn.execute(sql("insert_policy"), policy_id, name, owner, group_id)
        await _insert_version(conn, policy_id, 1, version, owner)


async def add_version(conn: asyncpg.Connection, policy_id: UUID, number: int,
                      version: PolicyVersion, created_by: str) -> bool:
    """Version `number` of the policy; False when it is no longer at `number - 1`."""
    async with conn.transaction():
        if await conn.fetchval(sql("set_policy_version"), policy_id, number) is None:
            return False
        await _insert_version(conn, policy_id, number, version, created_by)
    return True


async def _insert_version(conn: asyncpg.Connection, policy_id: UUID, number: int,
                          v: PolicyVersion, created_by: str) -> None:
    await conn.execute(sql("insert_policy_version"), policy_id, number, v.kind,
                       v.checkpoint_name, v.project_id, v.condition,
                       v.decision.model_dump(mode="json", exclude_defaults=True), v.mode,
                       created_by)


async def get_policy(conn: asyncpg.Connection, policy_id: UUID) -> PolicyRow | None:
    record = await conn.fetchrow(sql("live_policies"), policy_id, None, 1)
    return PolicyRow.from_record(record) if record else None


async def list_policies(conn: asyncpg.Connection, *, kind: str | None,
                        limit: int) -> list[PolicyRow]:
    return [PolicyRow.from_record(r)
            for r in await conn.fetch(sql("live_policies"), None, kind, limit)]


async def live_policy_named(conn: asyncpg.Connection, name: str, *, group_id: UUID | None,
                            owner: str) -> UUID | None:
    return await conn.fetchval(sql("live_policy_named"), name, group_id, owner)


async def delete_policy(conn: asyncpg.Connection, policy_id: UUID) -> bool:
    return await conn.fetchval(sql("delete_policy"), policy_id) is not None


async def policy_run(conn: asyncpg.Connection, run_id: UUID) -> PolicyRun | None:
    record = await conn.fetchrow(sql("policy_run"), run_id)
    if record is None:
        return None
    group_id = record["group_id"]
    return PolicyRun.model_validate({**dict(record), "cost_usd": float(record["cost_usd"]),
                                     "group_id": str(group_id) if group_id else None})


async def applicable(conn: asyncpg.Connection, run: PolicyRun,
                     checkpoint_name: str) -> list[ApplicablePolicy]:
    records = await conn.fetch(sql("applicable_policies"), run.kind, checkpoint_name, run.owner,
                               UUID(run.group_id) if run.group_id else None, run.project_id)
    return [ApplicablePolicy.from_record(r) for r in records]


async def record_verdicts(conn: asyncpg.Connection, *, run_id: UUID, request_id: UUID,
                          verdicts: list[PolicyVerdict]) -> None:
    await conn.executemany(sql("record_evaluation"), [
        (request_id, run_id, v.policy_id, v.version, v.name, v.mode, v.outcome,
         v.decision.decision if v.decision else None, v.error) for v in verdicts])


async def past_requests(conn: asyncpg.Connection, policy: PolicyRow,
                        limit: int) -> list[PastRequest]:
    records = await conn.fetch(sql("past_requests"), policy.kind, policy.checkpoint_name, limit,
                               policy.project_id, policy.group_id, policy.owner)
    return [PastRequest.model_validate({**dict(r), "cost_usd": float(r["cost_usd"])})
            for r in records]
