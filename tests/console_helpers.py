"""Helpers shared by the console tests and benchmark: sign-in links, and read-model rows
written the way a workflow writes them (waystation.persistence.writes), for states a test wants to
be in at once (a gate with a typed answer, a thousand pending decisions, a busy event stream)."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any
from uuid import UUID

import asyncpg

from waystation.api.auth import issue_login_code
from waystation.persistence.models import GateOption
from waystation.persistence.writes import (
    EventWrite,
    GateOpenWrite,
    ReadModelWrite,
    RunStateWrite,
    apply_write,
)

CODE_TTL_SECONDS = 600


async def login_path(pool: asyncpg.Pool, user: str, role: str = "user") -> str:
    """The path of a one-time sign-in link, as `waystation console-link` prints it."""
    async with pool.acquire() as conn:
        code = await issue_login_code(conn, user, role,  # type: ignore[arg-type]
                                      ttl_seconds=CODE_TTL_SECONDS)
    return f"/console/login?code={code}"


async def open_gate(pool: asyncpg.Pool, run_id: UUID, *, checkpoint: str = "review",
                    title: str = "Review the plan", context: dict[str, Any] | None = None,
                    options: tuple[str, ...] = ("approve", "reject")) -> UUID:
    """A pending request on `run_id`, written as the gate machinery writes one."""
    gate_id = uuid.uuid4()
    body = {"title": title, "context": context or {}, "options": list(options)}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    write = ReadModelWrite(run_id=run_id, open_gate=GateOpenWrite(
        id=gate_id, checkpoint_name=checkpoint, phase=1, title=title,
        description="Read the evidence, then decide.", context=context or {},
        options=[GateOption(value=o, label=o.capitalize(), description=f"{o} the plan")
                 for o in options],
        recommended_option=options[0], digest=digest),
        run=RunStateWrite(status="running", current_phase=1, hitl_state=checkpoint))
    async with pool.acquire() as conn:
        await apply_write(conn, write)
    return gate_id


async def append_events(pool: asyncpg.Pool, run_id: UUID, events: list[EventWrite]) -> None:
    async with pool.acquire() as conn:
        await apply_write(conn, ReadModelWrite(run_id=run_id, events=events))
