"""The modal a button opens when a click alone cannot say it all: a typed answer (a tool
call's edited arguments, a form), or a rejection's reason. Built from the request's answer
JSON Schema (one input per property of a flat object; the JSON itself otherwise), and read
back into the answer, with the schema's errors placed on the inputs they concern."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from waystation.activities.slack.blocks import ButtonValue, cut
from waystation.contracts.user_schemas import user_schema_validator
from waystation.contracts.writes import DEFAULT_REJECTING, AnswerMode, answer_mode
from waystation.persistence.models import GateRow
from waystation.workflows.gate_rules import answer_path

CALLBACK_ID = "waystation_decide"
FEEDBACK_BLOCK = "feedback"
JSON_BLOCK = "answer"
FIELD_PREFIX = "answer."
INPUT_ACTION = "value"
# A flat object with at most this many simple properties gets one input each.
MAX_FIELDS = 40
SIMPLE_TYPES = ("string", "integer", "number", "boolean")


class ModalContext(BaseModel):
    """What the modal carries back (its private_metadata): the button, and where to answer."""

    button: ButtonValue
    channel: str | None


def mode_of(gate: GateRow, option: str) -> AnswerMode:
    return answer_mode(gate.options, gate.answer_schema, option, rejecting=DEFAULT_REJECTING)


def needs_modal(gate: GateRow, option: str) -> bool:
    """An option carrying an answer, or a rejection (its reason is asked for)."""
    return mode_of(gate, option) != "none" or option in DEFAULT_REJECTING


def _fields(schema: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """The properties of a flat object schema, each of a simple type; None otherwise."""
    if not schema or schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties or len(properties) > MAX_FIELDS:
        return None
    if not all(isinstance(p, dict) and (p.get("type") in SIMPLE_TYPES or "enum" in p)
               for p in properties.values()):
        return None
    return properties


def _text_input(block_id: str, label: str, initial: str | None, *, optional: bool,
                multiline: bool = False, hint: str = "") -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": INPUT_ACTION,
                               "multiline": multiline}
    if initial:
        element["initial_value"] = cut(initial, 3000)
    block: dict[str, Any] = {"type": "input", "block_id": block_id, "optional": optional,
                             "label": {"type": "plain_text", "text": cut(label, 2000)},
                             "element": element}
    if hint:
        block["hint"] = {"type": "plain_text", "text": cut(hint, 2000)}
    return block


def _select(block_id: str, label: str, choices: list[Any], initial: Any, *,
            optional: bool) -> dict[str, Any]:
    options = [{"text": {"type": "plain_text", "text": cut(json.dumps(c), 75)},
                "value": json.dumps(c)} for c in choices[:100]]
    element: dict[str, Any] = {"type": "static_select", "action_id": INPUT_ACTION,
                               "options": options}
    chosen = next((o for o in options if o["value"] == json.dumps(initial)), None)
    if chosen is not None:
        element["initial_option"] = chosen
    return {"type": "input", "block_id": block_id, "optional": optional,
            "label": {"type": "plain_text", "text": cut(label, 2000)}, "element": element}


def decision_modal(gate: GateRow, option: str, context: ModalContext) -> dict[str, Any]:
    """The modal deciding `gate` with `option`."""
    label = next((o.label for o in gate.options if o.value == option), option)
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {
        "type": "mrkdwn", "text": cut(f"*{gate.title}*\nYou chose: *{label}*", 3000)}}]
    mode = mode_of(gate, option)
    if mode != "none":
        blocks += _answer_inputs(gate, optional=mode == "optional")
    blocks.append(_text_input(FEEDBACK_BLOCK, "Why (the run is told)" if option in
                              DEFAULT_REJECTING else "Feedback", None,
                              optional=option not in DEFAULT_REJECTING, multiline=True))
    return {"type": "modal", "callback_id": CALLBACK_ID,
            "private_metadata": context.model_dump_json(),
            "title": {"type": "plain_text", "text": "Decide"},
            "submit": {"type": "plain_text", "text": cut(label, 24)},
            "close": {"type": "plain_text", "text": "Cancel"}, "blocks": blocks[:100]}


def _answer_inputs(gate: GateRow, *, optional: bool) -> list[dict[str, Any]]:
    initial = gate.answer_initial
    fields = _fields(gate.answer_schema)
    if fields is None:
        shown = json.dumps(initial, indent=2) if initial is not None else ""
        return [_text_input(JSON_BLOCK, "Answer (JSON)", shown, optional=optional,
                            multiline=True, hint="Checked against the request's schema.")]
    required = set((gate.answer_schema or {}).get("required") or [])
    values = initial if isinstance(initial, dict) else {}
    blocks = []
    for name, spec in fields.items():
        block_id, label = FIELD_PREFIX + name, spec.get("title") or name
        is_optional = optional or name not in required
        if "enum" in spec or spec.get("type") == "boolean":
            blocks.append(_select(block_id, label, spec.get("enum") or [True, False],
                                  values.get(name), optional=is_optional))
        else:
            now = values.get(name)
            blocks.append(_text_input(block_id, label, None if now is None else str(now),
                                      optional=is_optional, hint=spec.get("description", "")))
    return blocks


class Submission(BaseModel):
    feedback: str | None
    answer: Any
    # By block id: what Slack shows under the input (response_action "errors").
    errors: dict[str, str]


def read_submission(gate: GateRow, option: str, values: dict[str, Any]) -> Submission:
    """The modal's inputs as a decision's feedback and answer, with the answer checked
    against the request's schema (errors by block, as Slack shows them)."""
    def raw(block_id: str) -> Any:
        entry = (values.get(block_id) or {}).get(INPUT_ACTION) or {}
        if entry.get("type") == "static_select":
            chosen = entry.get("selected_option")
            return json.loads(chosen["value"]) if chosen else None
        return entry.get("value")

    feedback = raw(FEEDBACK_BLOCK)
    mode = mode_of(gate, option)
    if mode == "none":
        return Submission(feedback=feedback, answer=None, errors={})
    errors: dict[str, str] = {}
    fields = _fields(gate.answer_schema)
    answer: Any
    if fields is None:
        text = raw(JSON_BLOCK)
        try:
            answer = json.loads(text) if text else None
        except json.JSONDecodeError as bad:
            return Submission(feedback=feedback, answer=None,
                              errors={JSON_BLOCK: f"not JSON: {bad.msg}"})
    else:
        answer = {}
        for name, spec in fields.items():
            value = raw(FIELD_PREFIX + name)
            if value is None or value == "":
                continue
            try:
                answer[name] = _typed(value, spec)
            except ValueError:
                errors[FIELD_PREFIX + name] = f"must be of type {spec.get('type')}"
        if not answer and mode == "optional":
            answer = None
        elif answer is not None:
            # Slack asks for required inputs itself; said here too, on each input left empty.
            required = (gate.answer_schema or {}).get("required") or []
            errors |= {FIELD_PREFIX + n: "required" for n in required
                       if n in fields and n not in answer and FIELD_PREFIX + n not in errors}
    if answer is None and mode == "required":
        errors.setdefault(_first_block(fields), "an answer is required with this option")
    if answer is not None and not errors and gate.answer_schema is not None:
        for wrong in user_schema_validator(gate.answer_schema).iter_errors(answer):
            path = list(wrong.instance_path)
            block = (FIELD_PREFIX + str(path[0]) if fields is not None and path
                     and str(path[0]) in fields else _first_block(fields))
            errors.setdefault(block, f"{answer_path(path)}: {wrong.message}")
    return Submission(feedback=feedback, answer=answer, errors=errors)


def _first_block(fields: dict[str, Any] | None) -> str:
    return FIELD_PREFIX + next(iter(fields)) if fields else JSON_BLOCK


def _typed(value: Any, spec: dict[str, Any]) -> Any:
    if not isinstance(value, str):
        return value
    kind = spec.get("type")
    if kind == "integer":
        return int(value)
    if kind == "number":
        return float(value)
    return value
