"""A decision policy's CEL condition: checked when it is written, evaluated when a gate opens
(the activity, `activities/decision_policies.py`) and over past requests (a dry run).

CEL (https://cel.dev) comes from `common-expression-language` (pyproject says why): it parses
to an AST and evaluates without side effects, loops or I/O, so a condition can neither hang a
worker nor reach anything but what it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import cel

from waystation.contracts.decision_policies import (
    PolicyDecision,
    PolicyMode,
    PolicyRequest,
    PolicyRun,
    PolicyVerdict,
)

MAX_CONDITION = 4000
# "ERROR: <input>:1:22: Syntax error: ..." (the parser's message, one per problem)
_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")
_UNDEFINED = re.compile(r"Undefined variable or function: '([^']+)'")
# Enough of each name for a condition that only tests a field's presence to run.
_SAMPLE = {"request": {"checkpoint": "", "options": [], "context": {}},
           "run": {"kind": "", "input": {}, "owner": "", "cost_usd": 0.0}}


@dataclass(frozen=True)
class ConditionError(Exception):
    """Why a condition cannot be used, and where in it (1-based line and column)."""

    message: str
    line: int | None = None
    column: int | None = None


def compile_condition(condition: str) -> Any:
    """The condition, compiled; a ConditionError naming the position of the first syntax
    error, or the name a condition uses that is neither `request` nor `run`."""
    if len(condition) > MAX_CONDITION:
        raise ConditionError(f"longer than {MAX_CONDITION} characters")
    try:
        program = cel.compile(condition)
    except ValueError as error:
        if found := _POSITION.search(str(error)):
            line, column, message = found.groups()
            raise ConditionError(message.strip(), int(line), int(column)) from None
        raise ConditionError(str(error).splitlines()[0]) from None
    try:
        program.execute(_SAMPLE)
    except RuntimeError as error:
        if found := _UNDEFINED.search(str(error)):
            at = condition.find(found.group(1))
            raise ConditionError(f"unknown name {found.group(1)!r}: a condition sees `request` "
                                 "and `run`", 1 + condition.count("\n", 0, max(at, 0)),
                                 _column(condition, at)) from None
    except Exception:  # noqa: BLE001, S110 - a field the sample lacks: the real request has it
        pass
    return program


def _column(text: str, at: int) -> int | None:
    return None if at < 0 else at - text.rfind("\n", 0, at)


def activation(request: PolicyRequest, run: PolicyRun) -> dict[str, Any]:
    """What a condition sees: `request` and `run` as plain JSON values (absent fields are
    absent, so `has(request.tool)` tells a tool approval)."""
    return {"request": request.model_dump(mode="json", exclude_none=True),
            "run": run.model_dump(mode="json")}


def judge(*, policy_id: Any, name: str, version: int, mode: PolicyMode, condition: str,
          decision: PolicyDecision, seen: dict[str, Any]) -> PolicyVerdict:
    """One policy's verdict on what `seen` (an `activation`) shows. A condition that cannot be
    evaluated on it (a field it lacks, a wrong type) comes to "error", never to a decision."""
    verdict = {"policy_id": policy_id, "name": name, "version": version, "mode": mode}
    try:
        held = cel.compile(condition).execute(seen)
    except Exception as error:  # noqa: BLE001 - the library raises several kinds
        return PolicyVerdict(**verdict, outcome="error", error=f"{type(error).__name__}: "
                                                              f"{str(error)[:300]}")
    if not isinstance(held, bool):
        return PolicyVerdict(**verdict, outcome="error",
                             error=f"the condition gave {type(held).__name__}, not a bool")
    if not held:
        return PolicyVerdict(**verdict, outcome="none")
    return PolicyVerdict(**verdict, outcome=decision.outcome, decision=decision)
