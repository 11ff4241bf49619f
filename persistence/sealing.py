"""Webhook secrets sealed at rest under WAYSTATION_SECRETS_KEY (Fernet: AES-128-CBC with an
HMAC-SHA256, from `cryptography`).

A key of its own, not the JWT secret: rotating the key that signs sessions must not silently
break every webhook, and a copy of the database alone must not let anyone sign as Waystation.
The setting holds one key or several, comma-separated: the first seals, each one opens. A key
is rotated by putting the new one first, running `waystation reseal-secrets` (every stored
secret sealed again under it), then dropping the old one.

A stored value without the prefix was written before secrets were sealed: it opens as it is,
and `reseal-secrets` seals it.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

PREFIX = "fernet:"


class SecretUnreadable(Exception):
    """Sealed under a key that is not (or no longer) in WAYSTATION_SECRETS_KEY."""


def parse_keys(setting: str) -> list[Fernet]:
    """The keys of a WAYSTATION_SECRETS_KEY value; ValueError names the one that is wrong."""
    keys = [k.strip() for k in setting.split(",") if k.strip()]
    if not keys:
        raise ValueError("WAYSTATION_SECRETS_KEY must hold at least one key")
    parsed = []
    for n, key in enumerate(keys, start=1):
        try:
            parsed.append(Fernet(key))
        except ValueError:
            raise ValueError(
                f"WAYSTATION_SECRETS_KEY key {n} is not 32 url-safe base64-encoded bytes "
                "(`waystation secrets-key` prints a new one)") from None
    return parsed


def new_key() -> str:
    return Fernet.generate_key().decode()


class SecretsBox:
    def __init__(self, setting: str) -> None:
        keys = parse_keys(setting)
        self._first = keys[0]
        self._all = MultiFernet(keys)

    def seal(self, secret: str) -> str:
        return PREFIX + self._first.encrypt(secret.encode()).decode()

    def open(self, stored: str) -> str:
        if not stored.startswith(PREFIX):
            return stored
        try:
            return self._all.decrypt(stored.removeprefix(PREFIX).encode()).decode()
        except InvalidToken:
            raise SecretUnreadable("the webhook's secret was sealed under a key that is not in "
                                   "WAYSTATION_SECRETS_KEY") from None

    def sealed_under_first(self, stored: str) -> bool:
        if not stored.startswith(PREFIX):
            return False
        try:
            self._first.decrypt(stored.removeprefix(PREFIX).encode())
        except InvalidToken:
            return False
        return True
