"""The planner's catalogue (package data) and the four tools over it (seed 003).

The tools are plain functions with typed arguments: PydanticAI derives each tool's JSON schema
from the signature, the model sees it, and an edited argument in an approval is checked
against it. They are deterministic, so a replayed or retried call answers the same.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel

Category = Literal["venue", "caterer", "photographer", "florist"]
SEARCH_LIMIT = 5


class Vendor(BaseModel):
    id: str
    name: str
    category: Category
    city: str
    capacity: int  # guests; 0 where it does not apply
    price: int  # INR per event (per plate for caterers)
    style: str
    unavailable: list[str]


@cache
def vendors() -> dict[str, Vendor]:
    text = (resources.files("waystation.kinds.agent.planner") / "catalogue.json").read_text()
    return {v["id"]: Vendor.model_validate(v) for v in json.loads(text)["vendors"]}


def _brief(vendor: Vendor) -> dict[str, Any]:
    return vendor.model_dump(exclude={"unavailable"})


async def search_vendors(category: Category, city: str | None = None,
                         min_capacity: int | None = None, style: str | None = None,
                         max_price: int | None = None) -> list[dict[str, Any]]:
    """Find vendors of a category, optionally in a city, for at least `min_capacity` guests,
    of a style, at most `max_price` INR; the best five, cheapest first."""
    found = [v for v in vendors().values() if v.category == category
             and (city is None or v.city.lower() == city.lower())
             and (min_capacity is None or v.capacity == 0 or v.capacity >= min_capacity)
             and (style is None or v.style == style.lower())
             and (max_price is None or v.price <= max_price)]
    return [_brief(v) for v in sorted(found, key=lambda v: (v.price, v.id))[:SEARCH_LIMIT]]


async def shortlist(vendor_ids: list[str]) -> dict[str, Any]:
    """Put vendors on the group's shortlist (unknown ids are reported, not added)."""
    known = [vendors()[i] for i in vendor_ids if i in vendors()]
    return {"shortlisted": [{"id": v.id, "name": v.name} for v in known],
            "unknown": [i for i in vendor_ids if i not in vendors()]}


async def check_availability(vendor_ids: list[str], date: str) -> dict[str, Any]:
    """Whether each vendor is free on `date` (YYYY-MM-DD)."""
    return {"date": date, "availability": [
        {"id": i, "name": vendors()[i].name, "available": date not in vendors()[i].unavailable}
        for i in vendor_ids if i in vendors()]}


async def book_vendor(vendor_id: str, date: str, guests: int) -> dict[str, Any]:
    """Book a vendor for `date` (YYYY-MM-DD) and `guests` people. Needs a human's approval."""
    vendor = vendors().get(vendor_id)
    if vendor is None:
        return {"booked": False, "reason": f"no vendor {vendor_id!r}"}
    if date in vendor.unavailable:
        return {"booked": False, "reason": f"{vendor.name} is not available on {date}"}
    if vendor.capacity and guests > vendor.capacity:
        return {"booked": False, "reason": f"{vendor.name} holds at most {vendor.capacity}"}
    # Derived from the booking itself, so a retried call names the same booking.
    ref = hashlib.sha256(f"{vendor_id}|{date}|{guests}".encode()).hexdigest()[:8]
    return {"booked": True, "booking_id": f"bk-{ref}", "vendor_id": vendor.id,
            "vendor": vendor.name, "date": date, "guests": guests}


def shortlisted_ids(result: dict[str, Any]) -> dict[str, list[str]]:
    """The vendors a `shortlist` result put on the list: the run's related entities."""
    return {"vendor_ids": [v["id"] for v in result["shortlisted"]]}


def booked_ids(result: dict[str, Any]) -> dict[str, list[str]]:
    """The vendor a `book_vendor` result booked (none when it was not booked, or when it was
    booked before results named the vendor's id: a replayed old history)."""
    booked = result.get("booked") and result.get("vendor_id")
    return {"vendor_ids": [booked]} if booked else {}
