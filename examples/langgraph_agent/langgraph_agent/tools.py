"""The graph's one tool. It runs inside the `tools` node's activity, and only once a person
approves it (graph.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field

# What the desk may refund without a manager: an edit above it is refused (422) at the gate.
MAX_REFUND_EUR = 500


class RefundArguments(BaseModel):
    """issue_refund's parameters: the schema an edit at the gate is checked against."""

    order_id: str = Field(pattern=r"^A-\d{4}$", description="The order, A-0000.")
    amount_eur: int = Field(gt=0, le=MAX_REFUND_EUR)
    reason: str = Field(max_length=200)


class Refund(BaseModel):
    refund_id: str
    order_id: str
    amount_eur: int
    reason: str


def issue_refund(arguments: RefundArguments) -> Refund:
    """Refund `amount_eur` euros on order `order_id`. Needs a person's approval."""
    # A real desk calls its payment provider here, with the tool call's id as the idempotency
    # key; the example's refund id is derived from the call, so it needs no store.
    return Refund(refund_id=f"rf-{arguments.order_id}-{arguments.amount_eur}",
                  **arguments.model_dump())
