"""The caller's email address, where requests it may decide are mailed."""

from __future__ import annotations

import asyncpg

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.schemas import ContactPut, ContactView
from waystation.persistence import decision_mail as mail_repo


async def put_contact(conn: asyncpg.Connection, user: User, body: ContactPut) -> ContactView:
    """Set the caller's address (sending the same one again answers the same)."""
    contact = await mail_repo.put_contact(conn, user.name, body.email)
    return ContactView(user=contact.user_name, email=contact.email,
                       updated_at=contact.updated_at)


async def get_contact(conn: asyncpg.Connection, user: User) -> ContactView:
    """The caller's address; 404 when none is set."""
    contact = await mail_repo.get_contact(conn, user.name)
    if contact is None:
        raise ApiError(404, "contact_not_found", "no email address is set; PUT /me/contact")
    return ContactView(user=contact.user_name, email=contact.email,
                       updated_at=contact.updated_at)
