"""The entities an agent run keeps (`related_entity_ids`, seed 003): ids its tools returned
that the agent declares, such as the planner's shortlisted and booked vendors.

An agent declares them with the `RelatedEntities` capability: for each tool, a function from
that tool's result to ids by entity kind (`{"vendor_ids": [...]}`). The run applies it to
every result of those tools, in workflow code, so the function must be pure like the rest of
the workflow: the same result gives the same ids on replay. The run shows the ids
(`GET /runs/{id}`) and re-primes a returning member's turn from them with its summary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import leaf_capabilities

EntityIds = dict[str, list[str]]
EntityExtractor = Callable[[Any], EntityIds]


class RelatedEntities(AbstractCapability[Any]):
    """Declares which tools' results name the run's entities, and how to read their ids."""

    def __init__(self, tools: Mapping[str, EntityExtractor]) -> None:
        self.tools = dict(tools)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # not for agent specs: its functions are code


def entity_extractors(agent: Any) -> dict[str, EntityExtractor]:
    """Every tool the agent declares entities for, with its extractor (none: an empty map)."""
    found: dict[str, EntityExtractor] = {}
    for capability in leaf_capabilities(agent.root_capability):
        if isinstance(capability, RelatedEntities):
            found.update(capability.tools)
    return found


def merge_entities(kept: EntityIds, found: EntityIds) -> EntityIds:
    """`kept` with the ids of `found` it lacks, first seen first: a run's entities only grow
    (a vendor shortlisted and then booked stays once)."""
    merged = {kind: list(ids) for kind, ids in kept.items()}
    for kind, ids in found.items():
        merged[kind] = list(dict.fromkeys([*merged.get(kind, []), *ids]))
    return merged
