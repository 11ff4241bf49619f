"""Calling a model from a kind's activities, beyond the `AgentBackend` interface: a backend by
name, the usage and failure of a call, the metered model and its price book, checking a
structured answer, the offline backend's keyword matching for a kind's offline answers, and
publishing a model's tokens live as it writes them (`MessageStream`, when `publishing()`).
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from activities.agents import backend_named
    from activities.agents.base import (
        INVALID_OUTPUT,
        ModelCallFailed,
        Usage,
        answers_in_place,
        usage_of,
    )
    from activities.agents.metered import ModelMeter
    from activities.agents.offline import keywords
    from activities.agents.prices import PriceBook
    from activities.agents.structured import AnswerProblem, validate_answer
    from activities.deltas import MessageStream, publishing

__all__ = [
    "INVALID_OUTPUT", "AnswerProblem", "MessageStream", "ModelCallFailed", "ModelMeter",
    "PriceBook", "Usage", "answers_in_place", "backend_named", "keywords", "publishing",
    "usage_of", "validate_answer",
]
