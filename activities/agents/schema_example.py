"""A value that matches a JSON Schema (the subset pydantic and users write), for answers
that must be schema-valid without a model: the offline backend and the test server."""

from __future__ import annotations

from typing import Any


def example_for(node: dict[str, Any], root: dict[str, Any] | None = None,
                name: str = "value", words: list[str] | None = None) -> Any:
    root = root if root is not None else node
    words = words or []
    if "$ref" in node:
        return example_for(root["$defs"][node["$ref"].rsplit("/", 1)[-1]], root, name, words)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            options = [o for o in node[key] if o.get("type") != "null"] or node[key]
            return example_for(options[0], root, name, words)
    if "enum" in node:
        return node["enum"][0]
    if "const" in node:
        return node["const"]
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {k: example_for(v, root, k, words) for k, v in node.get("properties", {}).items()}
    if kind == "array":
        count = max(1, node.get("minItems", 1))
        return [example_for(node.get("items", {}), root, name, words) for _ in range(count)]
    if kind == "integer":
        return int(max(node.get("minimum", 3), min(node.get("maximum", 3), 3)))
    if kind == "number":
        return float(max(node.get("minimum", 0.5), min(node.get("maximum", 0.5), 0.5)))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return " ".join([name.replace("_", " "), *words[:3]])
