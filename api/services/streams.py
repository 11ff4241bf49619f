"""What the REST SSE streams (api/routes/streams.py) read besides what the live loop
(api/services/live.py) yields: whether a run ended with no end event, and the decision
inbox's memberships, open requests and changed requests, each as the caller may read it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from waystation.api.auth import User
from waystation.api.schemas import DecisionView
from waystation.api.services.access import claims_of
from waystation.api.services.decisions import decision_views
from waystation.persistence import gates as gates_repo
from waystation.persistence import groups as groups_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence.claims import claimed_connection
from waystation.persistence.models import TERMINAL_RUN_STATUSES

# Every open request goes out when an inbox stream starts: a console shows them all at once
# (1,000 render in well under a second; see bench/bench_console.py).
INBOX_SNAPSHOT_LIMIT = 10_000


async def finished_without_end_event(pool: asyncpg.Pool, user: User, run_id: UUID,
                                     last_sent: int) -> bool:
    """Whether the run has finished and every event of it, up to `last_sent`, has been sent
    (a run that never started ends with no terminal event)."""
    async with claimed_connection(pool, claims_of(user)) as conn:
        run = await runs_repo.get_run(conn, run_id)
    return run is not None and run.status in TERMINAL_RUN_STATUSES and run.last_seq <= last_sent


async def group_roles(pool: asyncpg.Pool, user: User) -> dict[str, str]:
    """The caller's role in each of its groups, by group id (none for the service role, which
    reads every request)."""
    if user.is_service:
        return {}
    async with claimed_connection(pool, claims_of(user)) as conn:
        roles = await groups_repo.member_roles(conn, user.name)
    return {str(group): role for group, role in roles.items()}


async def open_requests(pool: asyncpg.Pool, user: User) -> list[DecisionView]:
    """Every pending request in the caller's inbox, newest first."""
    async with claimed_connection(pool, claims_of(user)) as conn:
        pending = await gates_repo.list_inbox(conn, owner=user.owner_filter, status="pending",
                                              limit=INBOX_SNAPSHOT_LIMIT)
        return await decision_views(conn, pending)


async def changed_request(pool: asyncpg.Pool, user: User,
                          change: dict[str, Any]) -> DecisionView | None:
    """The request a gate change names, as the caller may read it (row-level security hides
    the requests of runs it no longer reads)."""
    async with claimed_connection(pool, claims_of(user)) as conn:
        gate = await gates_repo.get_gate(conn, UUID(change["request_id"]))
        return (await decision_views(conn, [gate]))[0] if gate else None
