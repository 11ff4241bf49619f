"""The retention sweep's input and results (see workflows/retention.py)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class RetentionSweepInput(BaseModel):
    # None: finished runs are kept; only erased runs past their grace period go.
    retention_days: float | None = Field(None, gt=0)
    erasure_grace_hours: float = Field(72.0, ge=0)
    batch_size: int = Field(200, ge=1, le=10_000)
    # One sweep stops after this many batches; the next scheduled sweep goes on.
    max_batches: int = Field(500, ge=1)
    # A pause between batches leaves the database to live runs (bench/bench_retention.py).
    batch_pause_seconds: float = Field(1.0, ge=0, le=3600)


class RetentionSweepResult(BaseModel):
    runs_deleted: int
    artifacts_deleted: int
    archives: list[str]
    users_erased: int = 0


class PurgeBatchInput(BaseModel):
    finished_before: datetime | None
    erased_before: datetime | None
    batch_size: int


class PurgeBatchResult(BaseModel):
    runs_deleted: int
    artifacts_deleted: int
    archive: str | None  # the compressed JSONL file the batch was archived to, if any
    # Users whose erasure was carried out (personal rows beyond their runs;
    # waystation.persistence.erasure).
    users_erased: int = 0
