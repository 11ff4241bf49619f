"""The agent's one tool. It runs as a Temporal activity, and only once a person approves it."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

# What the desk may refund without a manager: an edit above it is refused (422) at the gate.
MAX_REFUND_EUR = 500


class Refund(BaseModel):
    refund_id: str
    order_id: str
    amount_eur: int
    reason: str


async def issue_refund(order_id: Annotated[str, Field(pattern=r"^A-\d{4}$")],
                       amount_eur: Annotated[int, Field(gt=0, le=MAX_REFUND_EUR)],
                       reason: Annotated[str, Field(max_length=200)]) -> Refund:
    """Refund `amount_eur` euros on order `order_id` (A-0000). Needs a person's approval."""
    # A real desk calls its payment provider here, with the tool call's id as the idempotency
    # key; the example's refund id is derived from the call, so it needs no store.
    return Refund(refund_id=f"rf-{order_id}-{amount_eur}", order_id=order_id,
                  amount_eur=amount_eur, reason=reason)
