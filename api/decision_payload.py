"""The JSON Schema of what deciding a request accepts: the body of
`POST /runs/{id}/decisions/{checkpoint}`, narrowed to one pending request.

Protocol clients (an AG-UI interrupt's `responseSchema`, an A2A `input-required` data part, an
MCP elicitation) are told this schema, so a form can be drawn and an answer checked before it is
sent; the decision itself is still checked by the run's own validator, which is the authority.
"""

from __future__ import annotations

from typing import Any

from waystation.api.schemas import DecisionView

FEEDBACK_MAX = 10_000  # as DecisionRequest.feedback


def payload_schema(view: DecisionView) -> dict[str, Any]:
    """One branch per option: its `decision` constant, and the typed answer where the option
    takes one (`required` or `optional`, against the request's own `answer_schema`)."""
    branches = [_branch(view, option.value, option.label, option.answer)
                for option in view.options]
    return {
        "type": "object",
        "title": view.title,
        "description": view.description,
        "required": ["decision"],
        "properties": {
            "decision": {"type": "string", "enum": [o.value for o in view.options]},
            "feedback": {"type": "string", "maxLength": FEEDBACK_MAX},
            "answer": {},
            "digest": {"type": "string", "const": view.digest,
                       "description": "The digest of the request reviewed; a stale one is "
                                      "refused."},
        },
        "additionalProperties": False,
        "oneOf": branches,
    }


def _branch(view: DecisionView, value: str, label: str, answer: str) -> dict[str, Any]:
    branch: dict[str, Any] = {"title": label,
                              "properties": {"decision": {"const": value}}}
    if answer != "none" and view.answer_schema is not None:
        branch["properties"]["answer"] = view.answer_schema
        if answer == "required":
            branch["required"] = ["decision", "answer"]
    else:
        branch["properties"]["answer"] = {"type": "null"}
    return branch
