"""Decision policies: create, list, read, change (a new version), delete, and a dry run over
the past requests of their gate.

A policy is a group's or a person's own. A group's is written by its deciders (the roles that
decide gates by default) and read by its members; a person's own applies to the runs they own
and is seen by nobody else (row-level security, migration 073). A refusal writes nothing.
"""

from __future__ import annotations

import uuid
from uuid import UUID

import asyncpg

from waystation.activities.policy_rules import ConditionError, activation, compile_condition, judge
from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.policy_schemas import (
    DryRunItem,
    DryRunRequest,
    DryRunView,
    PolicyBody,
    PolicyChange,
    PolicyCreate,
    PolicyList,
    PolicyQuery,
    PolicyView,
)
from waystation.api.services.access import require_member
from waystation.contracts.decision_policies import PolicyRequest, PolicyRun
from waystation.contracts.writes import DEFAULT_DECIDER_ROLES
from waystation.persistence import policies as repo
from waystation.persistence.policies import PolicyRow, PolicyVersion
from waystation.registry import Registry


async def create(conn: asyncpg.Connection, user: User, registry: Registry,
                 body: PolicyCreate) -> tuple[PolicyView, bool]:
    """A new policy at version 1, and True; the same policy sent again answers as the first
    (and False), a different one under a live name is a 409."""
    version = _checked(registry, body)
    await _require_writer(conn, user, body.group_id)
    existing = await repo.live_policy_named(conn, body.name, group_id=body.group_id,
                                            owner=user.name)
    if existing is not None:
        found = await _visible(conn, existing)
        if _version_of(found) == version:
            return PolicyView.of(found), False
        raise ApiError(409, "policy_exists", f"a policy named {body.name!r} exists here "
                                             f"({existing}); change it with PUT")
    policy_id = uuid.uuid4()
    try:
        await repo.create_policy(conn, policy_id=policy_id, name=body.name, owner=user.name,
                                 group_id=body.group_id, version=version)
    except asyncpg.UniqueViolationError:
        raise ApiError(409, "policy_exists", f"a policy named {body.name!r} exists here; "
                                             "change it with PUT") from None
    return PolicyView.of(await _visible(conn, policy_id)), True


async def list_policies(conn: asyncpg.Connection, query: PolicyQuery) -> PolicyList:
    """The policies the caller may read: its own and its groups'."""
    rows = await repo.list_policies(conn, kind=query.kind, limit=query.limit)
    return PolicyList(policies=[PolicyView.of(r) for r in rows])


async def read(conn: asyncpg.Connection, policy_id: UUID) -> PolicyView:
    return PolicyView.of(await _visible(conn, policy_id))


async def change(conn: asyncpg.Connection, user: User, registry: Registry, policy_id: UUID,
                 body: PolicyChange) -> PolicyView:
    """The policy's next version (none when the body says what its current one says): gates
    opened from now on are judged by it, and those judged before keep their version."""
    found = await _visible(conn, policy_id)
    for field, now in (("name", found.name), ("group_id", found.group_id)):
        sent = getattr(body, field)
        if sent is not None and sent != now:
            raise ApiError(422, "invalid_request", f"body.{field}: a policy's {field} cannot "
                                                   "change; create another policy",
                           details=[{"loc": ["body", field], "msg": "cannot change",
                                     "type": "immutable"}])
    version = _checked(registry, body)
    await _require_writer(conn, user, found.group_id, owner=found.owner)
    if _version_of(found) == version:
        return PolicyView.of(found)
    if not await repo.add_version(conn, policy_id, found.version + 1, version, user.name):
        raise ApiError(409, "policy_changed", f"policy {policy_id} changed meanwhile; read it "
                                              "and try again")
    return PolicyView.of(await _visible(conn, policy_id))


async def delete(conn: asyncpg.Connection, user: User, policy_id: UUID) -> None:
    """No new gate is judged by it; the gates it judged keep their verdicts."""
    found = await _visible(conn, policy_id)
    await _require_writer(conn, user, found.group_id, owner=found.owner)
    await repo.delete_policy(conn, policy_id)


async def dry_run(conn: asyncpg.Connection, policy_id: UUID,
                  request: DryRunRequest) -> DryRunView:
    """What the policy's current version would have come to on the latest requests of its
    gate that the caller may read, beside what was decided. Writes nothing."""
    policy = await _visible(conn, policy_id)
    items = []
    for past in await repo.past_requests(conn, policy, request.last):
        seen = activation(
            PolicyRequest.of(past.checkpoint_name, [str(o.get("value")) for o in past.options],
                             past.recommended_option, past.context),
            PolicyRun(kind=past.kind, input=past.input, owner=past.owner,
                      group_id=str(past.group_id) if past.group_id else None,
                      project_id=past.project_id, cost_usd=past.cost_usd))
        verdict = judge(policy_id=policy.id, name=policy.name, version=policy.version,
                        mode=policy.mode, condition=policy.condition, decision=policy.decision,
                        seen=seen)
        would = verdict.decision.decision if verdict.decision else None
        decided = past.decision if past.status in ("approved", "rejected") else None
        items.append(DryRunItem(
            request_id=past.id, run_id=past.run_id, checkpoint=past.checkpoint_name,
            created_at=past.created_at, status=past.status, decision=past.decision,
            decided_by=past.decision_by, outcome=verdict.outcome, would_decide=would,
            agrees=(would == decided) if would is not None and decided is not None else None,
            error=verdict.error))
    compared = [i for i in items if i.agrees is not None]
    return DryRunView(policy_id=policy.id, version=policy.version, evaluated=len(items),
                      matched=sum(1 for i in items if i.outcome not in ("none", "error")),
                      agreed=sum(1 for i in compared if i.agrees), compared=len(compared),
                      requests=items)


def _checked(registry: Registry, body: PolicyBody) -> PolicyVersion:
    """The version the body describes; 422 naming the field (and, for a condition that does
    not parse, the line and column) when it cannot be used."""
    if body.kind not in registry.kinds:
        raise ApiError(422, "invalid_request",
                       f"body.kind: unknown run kind {body.kind!r}; one of "
                       f"{', '.join(registry.kinds)}",
                       details=[{"loc": ["body", "kind"], "msg": "unknown run kind",
                                 "type": "unknown_kind"}])
    try:
        compile_condition(body.condition)
    except ConditionError as error:
        at = (f"line {error.line}, column {error.column}: " if error.line is not None
              else "")
        raise ApiError(422, "invalid_condition", f"body.condition: {at}{error.message}",
                       details=[{"loc": ["body", "condition"], "msg": error.message,
                                 "type": "cel", "line": error.line,
                                 "column": error.column}]) from None
    return PolicyVersion(kind=body.kind, checkpoint_name=body.checkpoint,
                         project_id=body.project_id, condition=body.condition,
                         decision=body.decision, mode=body.mode)


def _version_of(row: PolicyRow) -> PolicyVersion:
    return PolicyVersion.model_validate(row.model_dump(include=set(PolicyVersion.model_fields)))


async def _require_writer(conn: asyncpg.Connection, user: User, group_id: UUID | None, *,
                          owner: str | None = None) -> None:
    """A group's policy is written by the group's deciders; a person's own by that person
    (404 for a group the caller is not in, 403 naming the rule for a member who may not)."""
    if group_id is None:
        if owner is not None and owner != user.name and not user.is_service:
            raise ApiError(404, "policy_not_found", "policy not found")
        return
    role = await require_member(conn, user, group_id)
    if role is not None and role not in DEFAULT_DECIDER_ROLES:
        raise ApiError(403, "not_allowed",
                       f"role {role!r} may not write group {group_id}'s policies: it takes "
                       f"role {' or '.join(DEFAULT_DECIDER_ROLES)}",
                       details=[{"role": role, "allowed_roles": list(DEFAULT_DECIDER_ROLES)}])


async def _visible(conn: asyncpg.Connection, policy_id: UUID) -> PolicyRow:
    found = await repo.get_policy(conn, policy_id)
    if found is None:  # none, or not the caller's to read: the same answer
        raise ApiError(404, "policy_not_found", f"policy {policy_id} not found")
    return found
