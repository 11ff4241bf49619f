"""Sending one plain-text email through the SMTP server of `WAYSTATION_SMTP_URL`.

`smtp://[user:password@]host[:port]` (STARTTLS when `?starttls=true`), or
`smtps://...` for TLS from the first byte. smtplib blocks, so callers run it in a thread.
"""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from urllib.parse import parse_qs, unquote, urlsplit

TIMEOUT_SECONDS = 30


def send_mail(url: str, *, sender: str, to: str, subject: str, text: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ValueError("WAYSTATION_SMTP_URL must be smtp://host[:port] or smtps://host[:port]")
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message.set_content(text)
    secure = parts.scheme == "smtps"
    port = parts.port or (465 if secure else 25)
    client: smtplib.SMTP = (smtplib.SMTP_SSL(parts.hostname, port, timeout=TIMEOUT_SECONDS,
                                             context=ssl.create_default_context())
                            if secure else
                            smtplib.SMTP(parts.hostname, port, timeout=TIMEOUT_SECONDS))
    with client:
        if parse_qs(parts.query).get("starttls") == ["true"]:
            client.starttls(context=ssl.create_default_context())
        if parts.username:
            client.login(unquote(parts.username), unquote(parts.password or ""))
        client.send_message(message)
