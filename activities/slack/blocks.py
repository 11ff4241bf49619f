"""A request as a Slack message (Block Kit): what is asked, the run and its phase, the
recommendation and its evidence, one button per option while it waits, who decided what once
it does not, and links to the console and the Temporal Web UI.

Within Slack's limits (50 blocks, 3,000 characters a section, 75 a button's text, 2,000 its
value): long text is cut with an ellipsis, never refused by Slack."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import quote
from uuid import UUID

from pydantic import BaseModel

from waystation.activities.slack.web_api import SlackConfig
from waystation.persistence.models import GateAudit, GateRow, RunRow

SECTION_TEXT_LIMIT = 3000
BUTTON_TEXT_LIMIT = 75
MAX_BLOCKS = 50
# Buttons in one actions block (Slack allows 25 elements).
BUTTONS_PER_BLOCK = 25
# The action id of every option's button: the option is in its value.
DECIDE_ACTION = "waystation_decide"
# Context keys shown as the evidence summary (a kind puts what it wants people to see there).
EVIDENCE_KEYS = ("recommendation_reason", "reason", "evidence", "summary")


class ButtonValue(BaseModel):
    """What a button carries back in Slack's interaction: the request it decides, the option,
    and the digest of what the message showed (the decision is bound to it)."""

    request_id: UUID
    option: str
    digest: str


class SlackMessage(BaseModel):
    text: str  # the notification's plain text (and what screen readers say)
    blocks: list[dict[str, Any]]

    @property
    def shown(self) -> str:
        """A fingerprint of the message: sent again only when it changes."""
        body = json.dumps([self.text, self.blocks], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()[:32]


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": cut(text, SECTION_TEXT_LIMIT)}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context",
            "elements": [{"type": "mrkdwn", "text": cut(text, SECTION_TEXT_LIMIT)}]}


def gate_message(gate: GateRow, run: RunRow, audit: GateAudit | None,
                 config: SlackConfig) -> SlackMessage:
    """The message showing `gate` as it stands now."""
    head = f"*{gate.title}*" + ("" if gate.status == "pending" else f" — {_outcome(gate)}")
    blocks: list[dict[str, Any]] = [_section(head)]
    if gate.description:
        blocks.append(_section(gate.description))
    where = f"Run `{run.id}` ({run.kind}) · phase {gate.phase}"
    if run.phase_name:
        where += f" · {run.phase_name}"
    blocks.append(_context(where))
    tool = gate.context.get("tool")
    if isinstance(tool, str):
        arguments = json.dumps(gate.context.get("arguments"), indent=2, ensure_ascii=False)
        blocks.append(_section(f"*Tool* `{tool}`\n```{cut(arguments, 2800)}```"))
    if gate.recommended_option:
        blocks.append(_section(f"*Recommended:* {_label(gate, gate.recommended_option)}"))
    evidence = [f"• {k.replace('_', ' ')}: {gate.context[k]}" for k in EVIDENCE_KEYS
                if isinstance(gate.context.get(k), (str, int, float))]
    if evidence:
        blocks.append(_section("*Evidence*\n" + "\n".join(evidence)))
    figures = {k: v for k, v in gate.context.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if figures and tool is None:
        blocks.append(_context(" · ".join(f"{k.replace('_', ' ')}: {v:g}"
                                          for k, v in list(figures.items())[:10])))
    votes = audit.votes if audit else []
    if gate.quorum > 1 or (votes and gate.status == "pending"):
        said = ", ".join(f"{v.voter} → {_label(gate, v.option)}" for v in votes) or "none yet"
        blocks.append(_context(f"Votes {len(votes)} of {gate.quorum} needed: {said}"))
    if gate.status == "pending":
        blocks.extend(_buttons(gate))
        if gate.expires_at is not None:
            stamp = int(gate.expires_at.timestamp())
            blocks.append(_context(
                f"Expires <!date^{stamp}^{{date_short_pretty}} {{time}}|"
                f"{gate.expires_at:%Y-%m-%d %H:%M} UTC>"))
    blocks.append(_context(f"<{config.console_base}/console/#/runs/{run.id}|Open in the console>"
                           f" · <{_temporal_url(run, config)}|Temporal Web UI>"))
    text = f"{gate.title} ({gate.status})" if gate.status != "pending" else \
        f"Decision needed: {gate.title}"
    return SlackMessage(text=cut(text, SECTION_TEXT_LIMIT), blocks=blocks[:MAX_BLOCKS])


def _buttons(gate: GateRow) -> list[dict[str, Any]]:
    buttons = []
    for option in gate.options:
        value = ButtonValue(request_id=gate.id, option=option.value, digest=gate.digest)
        button: dict[str, Any] = {
            "type": "button", "action_id": f"{DECIDE_ACTION}:{option.value}"[:255],
            "text": {"type": "plain_text", "text": cut(option.label, BUTTON_TEXT_LIMIT)},
            "value": value.model_dump_json()}
        if option.value == gate.recommended_option:
            button["style"] = "primary"
        buttons.append(button)
    return [{"type": "actions", "block_id": f"options-{i}",
             "elements": buttons[i:i + BUTTONS_PER_BLOCK]}
            for i in range(0, len(buttons), BUTTONS_PER_BLOCK)]


def _label(gate: GateRow, option: str) -> str:
    return next((o.label for o in gate.options if o.value == option), option)


def _outcome(gate: GateRow) -> str:
    if gate.status in ("approved", "rejected") and gate.decision is not None:
        when = f" at {gate.decision_at:%Y-%m-%d %H:%M} UTC" if gate.decision_at else ""
        said = f": “{gate.feedback}”" if gate.feedback else ""
        return (f"{gate.status} by {gate.decision_by or 'someone'}"
                f" ({_label(gate, gate.decision)}){when}{said}")
    if gate.status == "expired":
        return "expired: nobody decided in time"
    if gate.status == "superseded":
        return "no longer asked (superseded, or its run ended)"
    return gate.status


def _temporal_url(run: RunRow, config: SlackConfig) -> str:
    return (f"{config.temporal_ui_base}/namespaces/{quote(config.temporal_namespace)}"
            f"/workflows/{quote(run.workflow_id)}")


def gone_message() -> SlackMessage:
    """What a message shows once its run is erased: nothing of the run, no button."""
    text = "This request is no longer asked: its run was removed."
    return SlackMessage(text=text, blocks=[_section(text)])


def notice_text(gate: GateRow, kind: str, number: int) -> str:
    """A reminder's or an escalation's thread reply."""
    if kind == "escalated":
        return f"Escalated: *{gate.title}* still waits; more people may now decide it."
    return f"Reminder {number}: *{gate.title}* still waits for a decision."
