"""The parameters of each read that filters or pages (one model per read): the REST routes
take them from the query string, a protocol adapter builds them from its own arguments, and
both get the same bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field, create_model

from waystation.contracts.kinds import PluginError, RunListFilter
from waystation.persistence.models import GateStatus, RunStatus

# A seq to read on from: 0 reads from the start.
AfterSeq = Annotated[int, Field(ge=0, le=2**62)]


class RunFilter(BaseModel):
    kind: str | None = Field(None, max_length=50)
    status: RunStatus | None = None
    awaiting_human: bool | None = None
    limit: int = Field(50, ge=1, le=200)
    cursor: str | None = Field(None, max_length=200)
    project_id: str | None = Field(None, min_length=1, max_length=200)
    q: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[^\x00]+$",
                          description="Text in the run's id, phase or input")
    group_id: UUID | None = Field(None, description="Only this group's runs")
    # Up to 30 days: a run quiet for longer is long past anyone's notice.
    stale_after: int | None = Field(None, ge=1, le=30 * 24 * 3600,
                                    description="Only runs `running` and not updated for this "
                                                "many seconds")
    hidden: bool = Field(False, description="List the runs the caller hid (and may restore) "
                                            "instead of visible ones")


F = TypeVar("F", bound=RunFilter)


def run_filter_model(filters: Sequence[RunListFilter], base: type[F]) -> type[F]:
    """`base` (`RunFilter`, or a protocol's model built on it) with the kinds' own filters
    (`ApiHooks.run_filters`) as fields of theirs, bounded as each kind says."""
    if taken := [f.name for f in filters if f.name in base.model_fields]:
        raise PluginError(f"run filter names {taken} are the runs list's own")
    fields: dict[str, Any] = {
        f.name: (str | None, Field(None, pattern=f.pattern, max_length=f.max_length,
                                   description=f.description)) for f in filters}
    return create_model(base.__name__, __base__=base, **fields) if fields else base


class EventQuery(BaseModel):
    after_seq: AfterSeq = 0
    limit: int = Field(100, ge=1, le=1000)


class TranscriptQuery(BaseModel):
    after_seq: AfterSeq = 0
    limit: int = Field(100, ge=1, le=500)


class InboxQuery(BaseModel):
    status: GateStatus | None = "pending"
    limit: int = Field(100, ge=1, le=500)

