"""Small helpers the tests share."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from persistence.runs import create_run
from workflows.validation_kind import VALIDATION
from workflows.validation_models import ValidationInput, ValidationRunInput

IDEA = "An app that helps small clinics schedule patients and cut no-shows."


async def new_validation_run(pool: asyncpg.Pool, owner: str = "alice",
                             **input_fields: Any) -> ValidationRunInput:
    run_id = uuid.uuid4()
    run_input = ValidationInput(entrepreneur_input=IDEA, **input_fields)
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="validation", owner=owner, group_id=None,
                         workflow_id=VALIDATION.workflow_id(run_id), idempotency_key=None,
                         input=run_input.model_dump(mode="json"))
    return ValidationRunInput(run_id=run_id, owner=owner, input=run_input)


async def eventually(check: Callable[[], Awaitable[Any]], *, timeout: float = 20.0,  # noqa: ASYNC109
                     interval: float = 0.05) -> Any:
    """Poll `check` until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value {value!r})")
        await asyncio.sleep(interval)
