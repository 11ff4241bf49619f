"""JSON Schemas that users supply: checked once, bounded, and never a reason to fetch anything.

A batch step's `output_schema` and a gate's `answer_schema` come from whoever submits a run.
Left to a general-purpose validator, a `$ref` to `http://…` or `file:…` made the API (and the
worker, and workflow code) fetch a URL of the user's choosing while the request waited, and a
`pattern` like `^(a+)+$` could backtrack for as long as it liked. So every user schema goes
through `check_user_schema` at submit time, and every validation (API, activity, workflow) is
built by `user_schema_validator`:

- only local references (`#…`) are allowed; the retriever refuses every other URI, so even a
  schema that slipped past the check (an older run's memo) can cause no I/O;
- patterns compile with Rust's `regex` engine (finite automata, linear time, no backtracking);
  a pattern it cannot express (lookaround, backreferences) is refused at submit;
- the serialized schema is at most `MAX_SCHEMA_BYTES` and nests at most `MAX_SCHEMA_DEPTH`, so
  checking one is a bounded, sub-millisecond piece of CPU work with no I/O: it stays on the
  event loop without stalling it.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
# Compiled-program caps: a pattern like `a{1000}{1000}` is refused instead of using memory.
_PATTERNS = jsonschema_rs.RegexOptions(size_limit=1 << 20, dfa_size_limit=1 << 20)
_REFERENCE_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_DRAFTS = frozenset({
    "http://json-schema.org/draft-04/schema", "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-07/schema", "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
})


class RemoteReferenceRefused(ValueError):
    """Raised by the retriever: a user schema named a document outside itself."""


def _refuse_retrieval(uri: str) -> Any:
    raise RemoteReferenceRefused(f"reference to {uri!r} refused: only local references "
                                 f"(#...) are allowed")


def user_schema_validator(schema: dict[str, Any]) -> jsonschema_rs.Validator:
    """The validator for a user schema: no retrieval, linear-time patterns."""
    return jsonschema_rs.validator_for(schema, retriever=_refuse_retrieval,
                                       pattern_options=_PATTERNS)


def check_user_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` when it is a usable, bounded, self-contained JSON Schema; else ValueError."""
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_SCHEMA_BYTES:
        raise ValueError(f"schema too large: {size} bytes serialized, at most "
                         f"{MAX_SCHEMA_BYTES}")
    _check_nodes(schema)
    try:
        # Building the validator also checks the schema against its meta-schema and every
        # pattern and local reference in it, so nothing is first discovered on an answer.
        user_schema_validator(schema)
    except jsonschema_rs.ValidationError as error:
        raise ValueError(f"not a valid JSON Schema: {error.message.splitlines()[0]}") from None
    return schema


def _check_nodes(schema: Any) -> None:
    pending: list[tuple[Any, int]] = [(schema, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict | list) and depth > MAX_SCHEMA_DEPTH:
            raise ValueError(f"schema nested too deeply: at most {MAX_SCHEMA_DEPTH} levels")
        if isinstance(node, dict):
            for key in _REFERENCE_KEYS:
                target = node.get(key)
                # A non-string value is a property of that name, left to the validator.
                if isinstance(target, str) and not target.startswith("#"):
                    raise ValueError(f"{key} {target!r} refused: only local references "
                                     f"(#...) are allowed")
            # A meta-schema is never fetched either: only the drafts the validator knows.
            meta = node.get("$schema")
            if isinstance(meta, str) and meta.rstrip("#") not in _DRAFTS:
                raise ValueError(f"$schema {meta!r} is not a known JSON Schema draft")
            pending.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            pending.extend((value, depth + 1) for value in node)
