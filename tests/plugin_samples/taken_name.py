"""A plug-in that registers a kind name a built-in kind already has."""

from dataclasses import replace

from waystation.kinds.validation.kind import VALIDATION

RUN_KINDS = [replace(VALIDATION, workflow_id_prefix="mine-")]
