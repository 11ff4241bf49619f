"""A plug-in whose input model is not a pydantic model."""

from dataclasses import dataclass

from waystation.contracts.kinds import RunKind
from waystation.kinds.validation.workflow import ValidationRun


@dataclass
class NotAModel:
    text: str


RUN_KINDS = [RunKind(name="not_pydantic", workflow=ValidationRun, input_model=NotAModel,
                     workflow_id_prefix="np-", summary=lambda run: "x")]
