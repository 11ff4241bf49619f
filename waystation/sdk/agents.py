"""Calling a model from a kind's activities, beyond the `AgentBackend` interface: a backend by
name, the usage and failure of a call, the metered model and its price book, checking a
structured answer, the offline backend's keyword matching for a kind's offline answers, and
publishing a model's tokens live as it writes them (`MessageStream`, when `publishing()`).
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.activities.agents import backend_named
    from waystation.activities.agents.base import (
        INVALID_OUTPUT,
        ModelCallFailed,
        Usage,
        answers_in_place,
        usage_of,
    )
    from waystation.activities.agents.metered import ModelMeter
    from waystation.activities.agents.offline import keywords
    from waystation.activities.agents.prices import PriceBook
    from waystation.activities.agents.structured import AnswerProblem, validate_answer
    from waystation.activities.deltas import MessageStream, publishing

__all__ = [
    "INVALID_OUTPUT", "AnswerProblem", "MessageStream", "ModelCallFailed", "ModelMeter",
    "PriceBook", "Usage", "answers_in_place", "backend_named", "keywords", "publishing",
    "usage_of", "validate_answer",
]
