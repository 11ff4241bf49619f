"""What a read-model write tells the people around a run: the notifications webhooks get.

Built inside the recorder's transaction, from the rows the write has just made, so each
notification exists exactly when its gate or run state does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import asyncpg

from waystation.contracts.events import (
    GATE_DECIDED,
    GATE_ESCALATED,
    GATE_EXPIRED,
    GATE_OPENED,
    GATE_REMINDED,
    RUN_FINISHED,
)
from waystation.contracts.writes import ReadModelWrite
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence.models import GateRow, RunRow
from waystation.persistence.webhooks import Notification

_CLOSED_EVENT = {"approved": GATE_DECIDED, "rejected": GATE_DECIDED, "expired": GATE_EXPIRED}


def may_notify(write: ReadModelWrite) -> bool:
    """Whether `write` can give rise to a notification (or a decision mail): a gate opened,
    reminded, escalated or closed, or a run ended. Nearly every write, a step's progress,
    cannot, and is applied alone: one statement, no transaction around it."""
    return (write.open_gate is not None or write.gate_notice is not None
            or (write.close_gate is not None and write.close_gate.status in _CLOSED_EVENT)
            or write.ends_run)


async def notifications_of(conn: asyncpg.Connection, write: ReadModelWrite, *,
                           closed_gate: GateRow | None) -> list[Notification]:
    """The notifications `write` (already applied on `conn`) gives rise to; each keyed by what
    happened, so applying the write again yields the same keys. `closed_gate` is what the
    write's close answered (persistence.writes.AppliedWrite): the request as it closed it."""
    found: list[tuple[str, str, dict[str, Any]]] = []
    if write.open_gate is not None:
        gate = await gates_repo.get_gate(conn, write.open_gate.id)
        if gate is not None:
            found.append((GATE_OPENED, f"{GATE_OPENED}:{gate.id}", _gate_data(gate)))
    if (notice := write.gate_notice) is not None:
        gate = await gates_repo.get_gate(conn, notice.request_id)
        if gate is not None and gate.status == "pending":
            kind = GATE_REMINDED if notice.kind == "reminded" else GATE_ESCALATED
            found.append((kind, f"{kind}:{gate.id}:{notice.number}",
                          _gate_data(gate) | {"number": notice.number}))
    if write.close_gate is not None and write.close_gate.status in _CLOSED_EVENT:
        # A close that closed nothing (a retried write finds the request closed; or its run
        # is erased) answered nothing: the request is read as it stands.
        gate = closed_gate or await gates_repo.get_gate(conn, write.close_gate.id)
        if gate is not None:
            kind = _CLOSED_EVENT[write.close_gate.status]
            found.append((kind, f"{kind}:{gate.id}", _gate_data(gate)))
    if write.ends_run:
        run = await runs_repo.get_run(conn, write.run_id)
        if run is not None:
            found.append((RUN_FINISHED, f"{RUN_FINISHED}:{run.id}", _run_data(run)))
    now = datetime.now(UTC).isoformat()
    # The Standard Webhooks payload shape: type, timestamp, data.
    return [Notification(key=key, type=kind, payload={"type": kind, "timestamp": now,
                                                      "data": data})
            for kind, key, data in found]


def _gate_data(gate: GateRow) -> dict[str, Any]:
    return gate.model_dump(mode="json", include={
        "run_id", "checkpoint_name", "phase", "title", "description", "options",
        "recommended_option", "digest", "status", "decision", "feedback", "decision_by",
        "decision_at", "expires_at", "decider_roles", "decider_users", "quorum",
        "answer_schema", "answer"}) | {"request_id": str(gate.id)}


def _run_data(run: RunRow) -> dict[str, Any]:
    return run.model_dump(mode="json", include={
        "kind", "owner", "group_id", "project_id", "status", "stop_reason", "error_message",
        "finished_at"}) | {"run_id": str(run.id)}
