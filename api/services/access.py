"""Who may do what with a run or a group: the rules every service applies before it acts.

A run or group the caller may not read answers 404, exactly like one that does not exist, so
nobody learns what others have; a run the caller reads but may not act on answers 403 naming
the rule.
"""

from __future__ import annotations

from uuid import UUID

import asyncpg

from waystation.api.auth import User, can_access, is_decider, may_decide
from waystation.api.errors import ApiError
from waystation.contracts.writes import DEFAULT_DECIDER_ROLES
from waystation.persistence import groups as groups_repo
from waystation.persistence.claims import SERVICE, Claims, set_claims
from waystation.persistence.models import RunRow

VIEWER = "viewer"


def claims_of(user: User) -> Claims:
    """What the database lets `user` see (row-level security, migration 022)."""
    return SERVICE if user.is_service else Claims(user=user.name)


async def act_as(conn: asyncpg.Connection, user: User) -> None:
    """From now on the connection's queries run for `user` (a mailed link, once verified,
    decides as its person)."""
    await set_claims(conn, claims_of(user))


async def group_role(conn: asyncpg.Connection, user: User, run: RunRow) -> str | None:
    """The caller's role in the run's group; None when it has no group or the caller is not
    a member (or needs none: the owner and the service role)."""
    if run.group_id is None or user.is_service or run.owner == user.name:
        return None
    return await groups_repo.member_role(conn, run.group_id, user.name)


async def may_read(conn: asyncpg.Connection, user: User, run: RunRow) -> bool:
    return can_access(user, run, await group_role(conn, user, run))


async def may_act(conn: asyncpg.Connection, user: User, run: RunRow,
                  decider_roles: list[str]) -> bool:
    """Whether the caller may act on the run as a decider would (see `require_decider`)."""
    return is_decider(user, run, await group_role(conn, user, run), decider_roles)


async def require_decider(conn: asyncpg.Connection, user: User, run: RunRow,
                          decider_roles: list[str], action: str) -> None:
    """403 naming the rule unless the caller may act on the run as a decider would."""
    may_decide(user, run, await group_role(conn, user, run), decider_roles, action)


async def require_member(conn: asyncpg.Connection, user: User, group_id: UUID) -> str | None:
    """The caller's role in the group (None for the service role): 404 for an unknown group
    or one the caller is not in, indistinguishable, as another user's run is."""
    if user.is_service:
        if await groups_repo.get_group(conn, group_id) is None:
            raise ApiError(404, "group_not_found", f"group {group_id} not found")
        return None
    role = await groups_repo.member_role(conn, group_id, user.name)
    if role is None:  # no such group, or not the caller's: the same answer
        raise ApiError(404, "group_not_found", f"group {group_id} not found")
    return role


async def require_group_owner(conn: asyncpg.Connection, user: User, group_id: UUID,
                              action: str) -> None:
    """403 naming the rule unless the caller owns the group (or is the service role); 404 as
    `require_member`. `action` says what and of which group ("change members of group …")."""
    role = await require_member(conn, user, group_id)
    if not user.is_service and role != groups_repo.OWNER:
        raise ApiError(403, "not_allowed", f"role {role!r} may not {action}: it takes role "
                                           f"'owner'",
                       details=[{"role": role, "allowed_roles": [groups_repo.OWNER]}])


async def require_group_decider(conn: asyncpg.Connection, user: User, group_id: UUID,
                                action: str) -> None:
    """403 naming the rule unless the caller is one of the group's deciders (a role that
    decides its runs by default: `DEFAULT_DECIDER_ROLES`); 404 as `require_member`."""
    role = await require_member(conn, user, group_id)
    if role is not None and role not in DEFAULT_DECIDER_ROLES:
        allowed = list(DEFAULT_DECIDER_ROLES)
        raise ApiError(403, "not_allowed", f"role {role!r} may not {action} in group "
                                           f"{group_id}: it takes one of {allowed}",
                       details=[{"role": role, "allowed_roles": allowed}])


async def require_run_starter(conn: asyncpg.Connection, user: User, group_id: UUID) -> None:
    """A run is started in a group by any member but a viewer (viewers only read)."""
    role = await require_member(conn, user, group_id)
    if role == VIEWER:
        raise ApiError(403, "not_allowed", f"role {VIEWER!r} may not start runs in group "
                                           f"{group_id}: viewers only read",
                       details=[{"role": role}])
