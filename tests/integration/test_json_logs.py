"""`WAYSTATION_LOG_FORMAT=json`: every line `waystation api` writes is one JSON object, and a
request's lines carry its trace id (here continued from the caller's `traceparent`)."""

from __future__ import annotations

import json
import secrets

import httpx

from tests.api_process import ApiProcess
from tests.fault_helpers import auth, free_port


async def test_json_log_lines_parse_and_carry_the_trace_id(migrated_url, tmp_path):
    api = ApiProcess(migrated_url, f"127.0.0.1:{free_port()}", tmp_path,
                     WAYSTATION_LOG_FORMAT="json", WAYSTATION_OTEL_EXPORTER="console")
    api.start()
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
            response = await http.get("/runs", headers={
                **auth(), "traceparent": f"00-{trace_id}-{parent_id}-01"})
            assert response.status_code == 200, response.text
    finally:
        api.stop()
    # stdout carries the console span exporter's output; stderr (the log) is checked here.
    lines = [line for line in api.stderr_text().splitlines() if line]
    records = [json.loads(line) for line in lines]  # every line parses
    assert all({"time", "level", "logger", "message", "trace_id", "span_id"} <= r.keys()
               for r in records), records
    access = [r for r in records if r["logger"] == "uvicorn.access" and "/runs" in r["message"]]
    assert access, records
    assert access[0]["trace_id"] == trace_id
    assert len(access[0]["span_id"]) == 16 and access[0]["span_id"] != parent_id
    assert any(r["message"].startswith("Application startup complete") for r in records)
