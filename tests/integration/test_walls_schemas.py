"""No fetching from schemas: user JSON Schemas are refused at submit when they point outside
themselves, are bounded in size and depth, never cause I/O later, and their patterns cannot
backtrack (issue 25, item 1)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import jsonschema_rs
import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError

from tests.inprocess_api import auth
from tests.integration.test_batch_api import api, submit  # noqa: F401 - the api fixture
from waystation.activities.agents.structured import AnswerProblem, validate_answer
from waystation.contracts.user_schemas import (
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_PATTERNS,
    check_user_schema,
    user_schema_validator,
)
from waystation.contracts.writes import GateOption
from waystation.workflows.gate_rules import DecisionInput, GateSpec, _check_answer

CATASTROPHIC = {"type": "string", "pattern": "^(a+)+$"}


@pytest_asyncio.fixture
async def listener() -> AsyncIterator[tuple[str, list[str]]]:
    """A server that records every connection and holds it open, as the issue's did."""
    seen: list[str] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append("connected")
        # The fake server holds the connection open, as the issue's did: the behaviour simulated.
        await asyncio.sleep(30)
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/s.json", seen


async def test_a_remote_reference_in_a_step_schema_is_refused_at_once_naming_it(
        api, listener):  # noqa: F811
    url, seen = listener
    before = (await api.get("/runs", headers=auth())).json()["runs"]
    for ref in (url, "file:///etc/passwd", "other.json#/x"):
        started = time.monotonic()
        response = await submit(api, items=[{"text": "x"}], steps=[
            {"name": "s", "template": "x", "output_schema": {
                "type": "object", "properties": {"a": {"$ref": ref}}}}])
        assert response.status_code == 422, response.text
        message = response.json()["error"]["message"]
        assert "output_schema" in message and "only local references" in message, message
        assert time.monotonic() - started < 2
    assert seen == []
    assert (await api.get("/runs", headers=auth())).json()["runs"] == before


async def test_a_remote_reference_in_a_gate_answer_schema_is_refused_naming_it(
        api, listener):  # noqa: F811
    url, seen = listener
    response = await api.post("/runs", headers=auth(), json={
        "kind": "validation", "gates": {"*": {"answer_schema": {"$ref": url}}},
        "input": {"entrepreneur_input": "A bakery that delivers by bike"}})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "answer_schema" in message and "only local references" in message
    assert seen == []


async def test_a_schema_that_slipped_past_the_check_still_fetches_nothing(listener) -> None:
    url, seen = listener
    with pytest.raises(jsonschema_rs.ValidationError, match="refused"):
        user_schema_validator({"$ref": url})
    # The in-workflow check (an update validator) builds the same validator: it refuses too.
    spec = GateSpec(checkpoint_name="g", phase=1, title="t", description="d",
                    options=[GateOption(value="approve", label="Approve")],
                    answer_schema={"$ref": url})
    with pytest.raises(jsonschema_rs.ValidationError):
        _check_answer(spec, DecisionInput(checkpoint_name="g", decision="approve",
                                          decided_by="a", answer="x"))
    await asyncio.sleep(0)
    assert seen == []


def test_local_references_and_known_drafts_are_kept() -> None:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$defs": {"n": {"type": "integer"}}, "type": "object",
              "properties": {"n": {"$ref": "#/$defs/n"}, "$ref": {"type": "string"}}}
    assert check_user_schema(schema) is schema
    assert user_schema_validator(schema).is_valid({"n": 1, "$ref": "a property"})


def _doubling(levels: int) -> dict:
    defs: dict = {f"d{n}": {"anyOf": [{"$ref": f"#/$defs/d{n + 1}"},
                                      {"$ref": f"#/$defs/d{n + 1}"}]} for n in range(levels)}
    defs[f"d{levels}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def test_references_back_up_and_shared_definitions_are_kept() -> None:
    tree = {"$defs": {"node": {"type": "object", "properties": {
        "left": {"$ref": "#/$defs/node"}, "right": {"$ref": "#/$defs/node"},
        "label": {"$ref": "#/$defs/label"}}}, "label": {"type": "string"}},
        "$ref": "#/$defs/node"}
    assert check_user_schema(tree) is tree
    assert user_schema_validator(tree).is_valid({"left": {"label": "a"}, "right": {}})
    assert check_user_schema(_doubling(8))


def _nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"items": schema}
    return schema


@pytest.mark.parametrize(("schema", "refusal"), [
    ({"$schema": "http://127.0.0.1:9/meta"}, "not a known JSON Schema draft"),
    ({"type": "object", "description": "x" * MAX_SCHEMA_BYTES}, "schema too large"),
    (_nested(MAX_SCHEMA_DEPTH + 1), "nested too deeply"),
    # Lookaround and backreferences need a backtracking engine: refused, never run.
    ({"type": "string", "pattern": "(a)\\1"}, "not a valid JSON Schema"),
    # Compiling a thousand patterns was a second of the event loop, and checking an answer
    # against them as long; one pattern could compile to a megabyte.
    ({"type": "object", "properties": {f"p{n}": {"type": "string", "pattern": f"^a{n}"}
                                       for n in range(MAX_SCHEMA_PATTERNS + 1)}},
     f"more than {MAX_SCHEMA_PATTERNS} patterns"),
    ({"type": "string", "pattern": "\\w{1,1000}"}, "not a valid JSON Schema"),
    # Each definition names the next twice: 2 ** 24 checks of one answer.
    (_doubling(24), "once its references are followed"),
], ids=["remote-meta-schema", "size", "depth", "backreference", "pattern-count",
        "pattern-size", "doubling-references"])
def test_what_cannot_be_checked_in_bounded_time_is_refused(schema, refusal) -> None:
    with pytest.raises(ValueError, match=refusal):
        check_user_schema(schema)
    assert check_user_schema(_nested(MAX_SCHEMA_DEPTH))


def test_a_catastrophic_pattern_answers_at_once() -> None:
    check_user_schema(CATASTROPHIC)
    started = time.monotonic()
    assert not user_schema_validator(CATASTROPHIC).is_valid("a" * 40 + "b")
    spec = GateSpec(checkpoint_name="g", phase=1, title="t", description="d",
                    options=[GateOption(value="approve", label="Approve")],
                    answer_schema=CATASTROPHIC)
    with pytest.raises(ApplicationError, match="does not match"):
        _check_answer(spec, DecisionInput(checkpoint_name="g", decision="approve",
                                          decided_by="a", answer="a" * 40 + "b"))
    with pytest.raises(AnswerProblem, match="'s'"):
        validate_answer({"s": "a" * 40 + "b"},
                        {"type": "object", "properties": {"s": CATASTROPHIC}})
    assert time.monotonic() - started < 1
