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
- the serialized schema is at most `MAX_SCHEMA_BYTES` and nests at most `MAX_SCHEMA_DEPTH`;
  it has at most `MAX_SCHEMA_PATTERNS` patterns, each compiling to at most
  `MAX_PATTERN_BYTES` (compiling a thousand patterns took a second, and checking a 200 KB
  answer against them as long), so checking one is a bounded piece of CPU work (a few
  milliseconds) with no I/O: it stays on the event loop without stalling it;
- local references cannot multiply the work: a schema whose references, followed, would
  make it over `MAX_EXPANDED_NODES` nodes (thirty definitions each naming the next twice in
  an `anyOf` are 2 ** 30 checks of one answer, in workflow code or on the worker's event
  loop) is refused. A reference back to a schema it is inside of (a tree's node naming
  itself) counts once: the validator follows it only as deep as the answer goes.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import jsonschema_rs

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_PATTERNS = 64
MAX_PATTERN_BYTES = 64 * 1024
MAX_EXPANDED_NODES = 20_000
# Compiled-program caps: a pattern like `\w{1,1000}` is refused instead of using memory
# and time on every answer.
_PATTERNS = jsonschema_rs.RegexOptions(size_limit=MAX_PATTERN_BYTES,
                                       dfa_size_limit=MAX_PATTERN_BYTES)
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
    _check_expansion(schema)
    try:
        # Building the validator also checks the schema against its meta-schema and every
        # pattern and local reference in it, so nothing is first discovered on an answer.
        user_schema_validator(schema)
    except jsonschema_rs.ValidationError as error:
        raise ValueError(f"not a valid JSON Schema: {error.message.splitlines()[0]}") from None
    return schema


def _check_nodes(schema: Any) -> None:
    pending: list[tuple[Any, int]] = [(schema, 1)]
    patterns = 0
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            # Over-counted where a property is named "pattern": refused only past the cap.
            patterns += isinstance(node.get("pattern"), str) + len(
                p if isinstance(p := node.get("patternProperties"), dict) else ())
            if patterns > MAX_SCHEMA_PATTERNS:
                raise ValueError(f"schema has more than {MAX_SCHEMA_PATTERNS} patterns")
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


def _check_expansion(schema: dict[str, Any]) -> None:
    """Refuse a schema that its local references expand past MAX_EXPANDED_NODES nodes."""
    anchors: dict[str, Any] = {}
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    anchors[node[key]] = node
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    sizes: dict[int, int] = {}
    inside: set[int] = set()

    def size(node: Any, base: Any) -> int:
        if not isinstance(node, dict | list):
            return 1
        if id(node) in inside:  # a reference back up: followed only as deep as the answer
            return 1
        if id(node) in sizes:
            return sizes[id(node)]
        inside.add(id(node))
        if isinstance(node, dict):
            base = node if "$id" in node else base
            total = 1 + sum(size(value, base) for value in node.values())
            for key in _REFERENCE_KEYS:
                target = node.get(key)
                if isinstance(target, str):
                    total += size(_target(target, base, anchors), base)
        else:
            total = 1 + sum(size(value, base) for value in node)
        inside.discard(id(node))
        if total > MAX_EXPANDED_NODES:
            raise ValueError(f"schema too large once its references are followed: over "
                             f"{MAX_EXPANDED_NODES} nodes")
        sizes[id(node)] = total
        return total

    size(schema, schema)


def _target(reference: str, base: Any, anchors: dict[str, Any]) -> Any:
    """What a local reference (`#`, `#/json/pointer`, `#anchor`) names, or None."""
    fragment = unquote(reference.removeprefix("#"))
    if not fragment.startswith("/"):
        return anchors.get(fragment, base) if fragment else base
    node = base
    for part in fragment[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
