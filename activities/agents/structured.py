"""Structured answers: the schema sent to a model, and tolerant reading of what comes back.

Models wrap JSON in code fences or a sentence ("Here is the profile: {...}"); a strict
`json.loads` turned that into a JSONDecodeError. The answer is read as the first JSON object
in the text, then validated against the task's JSON Schema; the error names the field, so a
re-ask can tell the model exactly what to fix and a final failure tells a human.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema_rs

from waystation.contracts.user_schemas import user_schema_validator

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class AnswerProblem(ValueError):
    """An answer that is not a JSON object matching the schema; `field` names where."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`: fenced, bare, or inside surrounding prose."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for start in (i for i, ch in enumerate(candidate) if ch == "{"):
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    raise AnswerProblem("the answer holds no JSON object")


def field_path(error: jsonschema_rs.ValidationError) -> str:
    path = ".".join(str(p) for p in error.instance_path)
    if isinstance(error.kind, jsonschema_rs.ValidationErrorKind.Required):
        # The missing property is named by the error, not its path.
        missing = error.kind.property
        path = f"{path}.{missing}" if path else missing
    return path or "(root)"


def validate_answer(value: dict[str, Any], schema: dict[str, Any]) -> None:
    # Schemas come from users: no retrieval, no backtracking patterns
    # (waystation.contracts.user_schemas).
    error = next(user_schema_validator(schema).iter_errors(value), None)
    if error is not None:
        where = field_path(error)
        raise AnswerProblem(f"field {where!r}: {error.message}", where)


def read_answer(text: str, schema: dict[str, Any] | None) -> dict[str, Any]:
    """The answer's object, validated against `schema` when there is one."""
    value = extract_json_object(text)
    if schema is not None:
        validate_answer(value, schema)
    return value


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` in the shape OpenAI's strict structured outputs accept.

    Strict mode wants every property required and no extra ones, and no defaults; optional
    pydantic fields stay nullable, so the answer still validates against the model.
    """
    strict = copy.deepcopy(schema)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("default", None)
            node.pop("title", None)
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
                node["additionalProperties"] = False
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(strict)
    return strict
