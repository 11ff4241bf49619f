"""How a validation run's crew tasks run (`input.tasks`), settled when the API starts it."""

from __future__ import annotations

import pytest

from tests.helpers import IDEA
from waystation.contracts.kinds import StartCheck
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.models import ValidationInput
from waystation.settings import Settings


@pytest.mark.parametrize(("backend", "delay_ms", "given", "settled"), [
    ("noop", 0, "auto", "in_place"),
    ("offline", 0, "auto", "in_place"),
    ("offline", 300, "auto", "activity"),  # a pause: a heartbeating activity
    ("openai", 0, "auto", "activity"),
    ("someones_plugin", 0, "auto", "activity"),
    ("openai", 0, "in_place", "in_place"),  # a run's own choice stands
    ("noop", 0, "activity", "activity"),
])
async def test_auto_is_settled_by_the_configured_backend(backend: str, delay_ms: int,
                                                         given: str, settled: str) -> None:
    run_input = ValidationInput(entrepreneur_input=IDEA, tasks=given)  # type: ignore[arg-type]
    settings = Settings(agent_backend=backend, offline_delay_ms=delay_ms)
    assert VALIDATION.api.start_check is not None
    await VALIDATION.api.start_check(StartCheck(input=run_input, user=None, settings=settings,
                                            conn=None))
    assert run_input.tasks == settled


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="tasks"):
        ValidationInput(entrepreneur_input=IDEA, tasks="sometimes")  # type: ignore[arg-type]
