"""The caller's email address, where requests it may decide are mailed."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import Conn, CurrentUser
from api.errors import ApiError
from api.schemas import ContactPut, ContactView
from persistence import decision_mail as mail_repo

router = APIRouter(prefix="/me/contact", tags=["people"])


@router.put("", response_model=ContactView)
async def put_contact(body: ContactPut, user: CurrentUser, conn: Conn) -> ContactView:
    """Set the address requests the caller may decide are mailed to (with WAYSTATION_SMTP_URL)."""
    contact = await mail_repo.put_contact(conn, user.name, body.email)
    return ContactView(user=contact.user_name, email=contact.email,
                       updated_at=contact.updated_at)


@router.get("", response_model=ContactView)
async def get_contact(user: CurrentUser, conn: Conn) -> ContactView:
    """The caller's address; 404 when none is set."""
    contact = await mail_repo.get_contact(conn, user.name)
    if contact is None:
        raise ApiError(404, "contact_not_found", "no email address is set; PUT /me/contact")
    return ContactView(user=contact.user_name, email=contact.email,
                       updated_at=contact.updated_at)
