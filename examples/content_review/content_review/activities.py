"""The review's side effects: drafting with the worker's agent backend, and publishing."""

from __future__ import annotations

import re

from temporalio import activity

from content_review.backend import write_draft
from content_review.models import Draft, DraftInput, Published, PublishInput
from waystation.sdk import AgentBackend, AgentRequest


class ReviewActivities:
    def __init__(self, backend: AgentBackend) -> None:
        self.backend = backend

    @activity.defn(name="content_review.draft")
    async def draft(self, request: DraftInput) -> Draft:
        context = {"topic": request.topic, "audience": request.audience,
                   "feedback": request.feedback}
        answer = await self.backend.run(AgentRequest(
            crew="content", task="draft_article", agent="writer",
            instructions=f"Write a short article about {request.topic} for {request.audience}.",
            context=context, feedback=request.feedback))
        # A backend that answers with no title or body for this task (the offline default)
        # gets the house style instead.
        fields = answer.output or {}
        output = fields if {"title", "body"} <= set(fields) else write_draft(context)
        body = str(output["body"])
        return Draft(revision=request.revision, title=str(output["title"]), body=body,
                     words=len(body.split()))

    @activity.defn(name="content_review.publish")
    async def publish(self, request: PublishInput) -> Published:
        # Deterministic from the draft, so a retried publish names the same page.
        slug = re.sub(r"[^a-z0-9]+", "-", request.draft.title.lower()).strip("-")[:60]
        return Published(slug=f"{slug}-r{request.draft.revision}")
