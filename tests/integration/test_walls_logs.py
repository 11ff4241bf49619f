"""Decide-link tokens never reach the logs (issue 25, review): a link's token is what lets
its holder decide, so the access log and the app's own lines show `/decide-link/[redacted]`."""

from __future__ import annotations

import logging
import secrets

import httpx
import pytest

from tests.api_process import ApiProcess
from tests.fault_helpers import free_port
from waystation.logs import redact_decide_links


@pytest.mark.parametrize("log_format", ["json", "text"])
async def test_the_access_log_shows_no_decide_link_token(migrated_url, tmp_path, log_format):
    token = secrets.token_urlsafe(32)
    api = ApiProcess(migrated_url, f"127.0.0.1:{free_port()}", tmp_path,
                     WAYSTATION_LOG_FORMAT=log_format)
    api.start()
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
            # Whatever the answer (no Temporal here: 503), the request is in the access log.
            for method in ("GET", "POST"):
                await http.request(method, f"/decide-link/{token}?x=1", json={})
    finally:
        api.stop()
    log = api.stderr_text()
    assert token not in log
    assert log.count("/decide-link/[redacted]") >= 2, log


def test_a_record_with_arguments_is_redacted_once_formatted() -> None:
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "opened %s for %s",
                               ("https://w.example/decide-link/abc.def-123", "bob"), None)
    assert redact_decide_links(record)
    assert record.getMessage() == "opened https://w.example/decide-link/[redacted] for bob"
    # A Slack link's code likewise (it says whom a Slack user's clicks decide as).
    slack = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1,
                              '"GET /slack/link/Zx-9_code HTTP/1.1" 200', None, None)
    assert redact_decide_links(slack)
    assert slack.getMessage() == '"GET /slack/link/[redacted] HTTP/1.1" 200'
