"""ContentReview: draft, ask an editor, revise until approved, then ask before publishing.

Everything Waystation-specific comes from `waystation.sdk.RunWorkflow`: the run's status and
events, its snapshots, the Web UI's details, and the gates (`ask_human`), decided through the
same API, inbox and stream as every other kind.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from content_review.activities import ReviewActivities
    from content_review.models import Draft, DraftInput, PublishInput, ReviewResult, ReviewRunInput
    from waystation.sdk import GateOption, GateSpec, RunWorkflow

ACTIVITY_TIMEOUT = timedelta(minutes=5)
REVIEW_GATE = "approve_draft"
PUBLISH_GATE = "confirm_publish"


@workflow.defn(name="ContentReview")
class ContentReview(RunWorkflow):
    @workflow.init
    def __init__(self, arg: ReviewRunInput) -> None:
        self._arg = arg
        self._draft: Draft | None = None
        self._feedback: str | None = None
        self.init_run(arg.run_id)

    @workflow.run
    async def run(self, arg: ReviewRunInput) -> ReviewResult:
        return await self.lifecycle(self._review)

    async def _review(self) -> ReviewResult:
        inp = self._arg.input
        self.stage_start(topic=inp.topic)
        for revision in range(1, inp.max_revisions + 2):
            draft = await self._write(revision)
            outcome = await self.ask_human(functools.partial(self._review_gate, draft),
                                           where=f"draft {revision}")
            if outcome.decision is None:
                await self.fail(f"{REVIEW_GATE} expired with no decision",
                                stop_reason="gate_expired")
            assert outcome.decision is not None
            if outcome.status == "approved":
                break
            self._feedback = outcome.decision.feedback or "rejected without feedback"
        else:
            await self.fail(f"rejected {inp.max_revisions + 1} times", stop_reason="rejected")
        assert self._draft is not None
        confirm = await self.ask_human(self._publish_gate, where="ready to publish")
        if confirm.status != "approved":
            await self.fail("publishing was declined", stop_reason="not_published")
        published = await workflow.execute_activity_method(
            ReviewActivities.publish, PublishInput(run_id=self.run_id, draft=self._draft),
            start_to_close_timeout=ACTIVITY_TIMEOUT, summary="publish")
        result = ReviewResult(run_id=self.run_id, outcome="published", slug=published.slug,
                              revisions=self._draft.revision)
        await self.complete(result, stop_reason="published", details=f"published {published.slug}",
                            slug=published.slug)
        return result

    async def _write(self, revision: int) -> Draft:
        inp = self._arg.input
        self.show(f"writing draft {revision}")
        draft = await workflow.execute_activity_method(
            ReviewActivities.draft,
            DraftInput(run_id=self.run_id, topic=inp.topic, audience=inp.audience,
                       revision=revision, feedback=self._feedback),
            start_to_close_timeout=ACTIVITY_TIMEOUT, summary=f"draft {revision}")
        self._draft = draft
        # Keyed by revision: a replay or a retried write records it once.
        self.stage(events=[self.event(f"draft.{revision}", "draft.written", phase=revision,
                                      status="completed",
                                      output={"title": draft.title, "words": draft.words})],
                   snapshot=f"draft {revision}", with_state=True)
        return draft

    def _review_gate(self, draft: Draft) -> GateSpec:
        return GateSpec(
            checkpoint_name=REVIEW_GATE, phase=draft.revision, title=f"Review: {draft.title}",
            description=draft.body,
            context={"revision": draft.revision, "words": draft.words,
                     "audience": self._arg.input.audience},
            options=[GateOption(value="approve", label="Approve the draft"),
                     GateOption(value="reject", label="Send back with feedback")],
            recommended_option="approve",
            expires_in=timedelta(seconds=self._arg.input.review_timeout_seconds))

    def _publish_gate(self) -> GateSpec:
        assert self._draft is not None
        return GateSpec(
            checkpoint_name=PUBLISH_GATE, phase=self._draft.revision,
            title=f"Publish “{self._draft.title}”?", description="The approved draft goes live.",
            options=[GateOption(value="publish", label="Publish"),
                     GateOption(value="hold", label="Do not publish")],
            recommended_option="publish", rejecting_options=["hold"],
            expires_in=timedelta(seconds=self._arg.input.review_timeout_seconds),
            expiry_policy="default", default_option="hold")

    def position(self) -> tuple[int, str | None]:
        revision = self._draft.revision if self._draft else 0
        return revision, f"draft {revision}" if revision else "starting"

    def kind_state(self) -> dict[str, Any]:
        return {"draft": self._draft.model_dump(mode="json") if self._draft else None,
                "feedback": self._feedback}
