"""The schema protocol clients are told for answering a request accepts what deciding accepts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from jsonschema import Draft202012Validator

from waystation.api.decision_payload import payload_schema
from waystation.api.schemas import DecisionView
from waystation.contracts.writes import GateOption

DIGEST = "a" * 64


def _view(**fields) -> DecisionView:
    return DecisionView(
        request_id=uuid.uuid4(), run_id=uuid.uuid4(), checkpoint_name="approve_book_vendor_1",
        phase=1, title="Book Rosewood Estate?", description="The agent asks to book.",
        context={}, digest=DIGEST, expiry_policy="reject", default_option=None,
        status="pending", decision=None, feedback=None, decided_by=None, decided_at=None,
        recommended_option="approve", expires_at=None, created_at=datetime.now(UTC),
        decider_roles=[], **fields)


def _accepts(view: DecisionView, payload: dict) -> bool:
    return Draft202012Validator(payload_schema(view)).is_valid(payload)


def test_a_tool_approval_accepts_each_option_and_an_edit_typed_by_the_tool_schema():
    view = _view(options=[GateOption(value="approve", label="Approve"),
                          GateOption(value="reject", label="Reject"),
                          GateOption(value="edit", label="Edit", answer="required")],
                 answer_schema={"type": "object", "required": ["guests"],
                                "properties": {"guests": {"type": "integer"}}})
    assert Draft202012Validator.check_schema(payload_schema(view)) is None
    assert _accepts(view, {"decision": "approve"})
    assert _accepts(view, {"decision": "reject", "feedback": "not that one", "digest": DIGEST})
    assert _accepts(view, {"decision": "edit", "answer": {"guests": 150}})
    assert not _accepts(view, {"decision": "edit"})  # an edit carries its arguments
    assert not _accepts(view, {"decision": "edit", "answer": {"guests": "many"}})
    assert not _accepts(view, {"decision": "approve", "answer": {"guests": 1}})
    assert not _accepts(view, {"decision": "maybe"})
    assert not _accepts(view, {"decision": "approve", "digest": "b" * 64})
    assert not _accepts(view, {"decision": "approve", "extra": 1})


def test_an_optional_answer_may_be_left_out():
    view = _view(options=[GateOption(value="approve", label="Approve", answer="optional"),
                          GateOption(value="reject", label="Reject")],
                 answer_schema={"type": "string"})
    assert _accepts(view, {"decision": "approve"})
    assert _accepts(view, {"decision": "approve", "answer": "edited text"})
    assert not _accepts(view, {"decision": "approve", "answer": 3})
