"""Which actions need a human's yes first: buying, signing in, deleting (and their kin).

Matched on the words a person sees and on the element's id, so "Buy now · pay $7" and
`id/delete_account` both count. The workflow's policy asks through a human gate before them.
"""

from __future__ import annotations

import re

_SENSITIVE = re.compile(
    r"\b(buy|purchase|pay|checkout|order now|subscribe|sign[ _-]?in|log[ _-]?in|login|"
    r"sign[ _-]?up|delete|remove account|erase|reset|transfer)\b|delete_|_delete|login|sign_in",
    re.IGNORECASE)


def is_sensitive(label: str, selector: str) -> bool:
    return bool(_SENSITIVE.search(label) or _SENSITIVE.search(selector.rsplit(">", 1)[-1]))
