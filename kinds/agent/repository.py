"""The agent kind's own table, `agent_runs` (its migration 088): an agent run's summary and
related entities. The workflow writes them with the run's progress (`kind_fields`, see
kinds/agent/workflow.py); these read them back for the run's view, its transcript and the
retention sweep's archive."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel

from waystation.sdk import ViewContext
from waystation.sdk.reads import queries_in

sql = queries_in(resources.files(__package__) / "queries")


class AgentRunFields(BaseModel):
    """What `GET /runs/{id}` adds for an agent run (null until the run writes them)."""

    context_summary: str | None = None
    related_entity_ids: dict[str, list[str]] | None = None


async def run_fields(conn: asyncpg.Connection, run_id: UUID) -> AgentRunFields:
    row = await conn.fetchrow(sql("agent_run_fields"), run_id)
    return AgentRunFields.model_validate(dict(row)) if row is not None else AgentRunFields()


async def view(context: ViewContext) -> dict[str, Any]:
    """The kind's `ApiHooks.view`: the run's summary and related entities."""
    return (await run_fields(context.conn, context.run.id)).model_dump()


async def archive_sections(conn: asyncpg.Connection,
                           run_ids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """Per run with a row: its `agent_run`, as archived."""
    return {r["run_id"]: {"agent_run": json.loads(r["fields"])}
            for r in await conn.fetch(sql("archive_agent_runs"), run_ids)}
