"""The one registration line's target: the content-review kind's descriptor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from content_review.activities import ReviewActivities
from content_review.models import ReviewInput
from content_review.workflow import ContentReview
from waystation.sdk import GatePolicy, RunKind, WorkerDeps, WorkerHooks, shorten


def _activities(deps: WorkerDeps) -> Sequence[Callable[..., Any]]:
    review = ReviewActivities(deps.backend)
    return [review.draft, review.publish]


CONTENT_REVIEW = RunKind(
    name="content_review", workflow=ContentReview, input_model=ReviewInput,
    workflow_id_prefix="content-review-", worker=WorkerHooks(activities=_activities),
    summary=lambda run: f"Content review for {run.owner}: {shorten(run.input.topic)}",
    details=lambda run: f"run {run.run_id} · audience: {run.input.audience} · "
                        f"up to {run.input.max_revisions} revisions",
    description="Draft an article, revise it with an editor's feedback, confirm publishing.",
    # Every review waiting for a day is a reminder to its deciders (a run's own `gates`
    # may change or drop it).
    gate_policy={"*": GatePolicy(remind_every=timedelta(days=1))})
