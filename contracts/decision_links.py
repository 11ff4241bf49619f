"""Signed decision-link tokens: `<link id hex>.<HMAC-SHA256 of it>`, base64url.

The worker signs them into emails; the API checks them. The signature makes a guessed or
altered token worthless before any database read; single use and expiry live in the
`decision_links` row the id names.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from uuid import UUID

_PURPOSE = b"waystation-decide-link:"


def _signature(secret: str, link_id: UUID) -> str:
    digest = hmac.new(secret.encode(), _PURPOSE + link_id.bytes, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def sign_link(secret: str, link_id: UUID) -> str:
    return f"{link_id.hex}.{_signature(secret, link_id)}"


def verify_link(secret: str, token: str) -> UUID | None:
    """The link id of a token this installation signed; None for anything else."""
    head, _, signature = token.partition(".")
    try:
        link_id = UUID(hex=head)
    except ValueError:
        return None
    # Compared as bytes: compare_digest refuses non-ASCII str, and a token may hold anything.
    if len(head) != 32 or not hmac.compare_digest(signature.encode(),
                                                  _signature(secret, link_id).encode()):
        return None
    return link_id
