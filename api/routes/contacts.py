"""The caller's email address, where requests it may decide are mailed."""

from __future__ import annotations

from fastapi import APIRouter

from waystation.api.deps import Conn, CurrentUser
from waystation.api.schemas import ContactPut, ContactView
from waystation.api.services import contacts

router = APIRouter(prefix="/me/contact", tags=["people"])


@router.put("", response_model=ContactView)
async def put_contact(body: ContactPut, user: CurrentUser, conn: Conn) -> ContactView:
    """Set the address requests the caller may decide are mailed to (with WAYSTATION_SMTP_URL)."""
    return await contacts.put_contact(conn, user, body)


@router.get("", response_model=ContactView)
async def get_contact(user: CurrentUser, conn: Conn) -> ContactView:
    """The caller's address; 404 when none is set."""
    return await contacts.get_contact(conn, user)
