"""What a content review takes, carries and returns: one pydantic model in and out of each
workflow and activity, so fields can be added without breaking running reviews."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class ReviewInput(BaseModel):
    """`POST /runs` with `{"kind": "content_review", "input": {...}}`."""

    model_config = ConfigDict(extra="forbid")
    topic: str = Field(min_length=3, max_length=500, description="What the article is about.")
    audience: str = Field("general readers", min_length=1, max_length=200)
    max_revisions: int = Field(2, ge=0, le=5, description="Drafts a reviewer may send back.")
    review_timeout_seconds: int = Field(3 * 24 * 3600, ge=1, le=90 * 24 * 3600)


class ReviewRunInput(BaseModel):
    """The workflow's argument: Waystation builds it from run_id, owner and input."""

    run_id: UUID
    owner: str
    input: ReviewInput


class DraftInput(BaseModel):
    run_id: UUID
    topic: str
    audience: str
    revision: int
    feedback: str | None = None


class Draft(BaseModel):
    revision: int
    title: str
    body: str
    words: int


class PublishInput(BaseModel):
    run_id: UUID
    draft: Draft


class Published(BaseModel):
    slug: str


class ReviewResult(BaseModel):
    run_id: UUID
    outcome: Literal["published"]
    slug: str
    revisions: int
