"""The desk's one tool, a Temporal activity: inside the `agent` run it runs on a worker, once,
and only once a person approves it (agent.py)."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import Field
from temporalio import activity

# What the desk may refund without a manager: an edit above it is refused (422) at the gate.
MAX_REFUND_EUR = 500


@activity.defn(name="openai_agents_agent.issue_refund")
async def issue_refund(order_id: Annotated[str, Field(pattern=r"^A-\d{4}$")],
                       amount_eur: Annotated[int, Field(gt=0, le=MAX_REFUND_EUR)],
                       reason: Annotated[str, Field(max_length=200)]) -> str:
    """Refund `amount_eur` euros on order `order_id` (A-0000). Needs a person's approval."""
    # A real desk calls its payment provider here, with the tool call's id as the idempotency
    # key; the example's refund id is derived from the call, so it needs no store.
    return json.dumps({"refund_id": f"rf-{order_id}-{amount_eur}", "order_id": order_id,
                       "amount_eur": amount_eur, "reason": reason}, separators=(",", ":"))
