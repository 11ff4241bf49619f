"""Abuse: malformed and oversized bodies, wrong content types, out-of-range paging, bad ids and
bad tokens. Each is a precise 4xx in the one error shape, and nothing is written: the row
counts of runs, run_events, run_snapshots and hitl_requests, and the target run itself, are
the same afterwards. (tests/integration/test_api.py checks the status codes of a first set of these;
this file adds many more and the "nothing written" half.)
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest
import pytest_asyncio

from tests.helpers import IDEA, eventually
from tests.inprocess_api import SECRET, auth, start_run, wait_pending
from waystation.activities.agents import backend_named
from waystation.api.app import create_app
from waystation.settings import Settings
from waystation.worker import build_worker

CHECKPOINT = "approve_founders_brief"
COUNTED = ("runs", "run_events", "run_snapshots", "hitl_requests")


@pytest_asyncio.fixture
async def api(settings: Settings, dev_env, pool) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    worker = build_worker(dev_env.client, pool, task_queue=settings.temporal_task_queue,
                          backend=backend_named("offline"))
    async with app.router.lifespan_context(app), worker:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


async def counts(pool) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT " + ", ".join(
            f"(SELECT count(*) FROM {table}) AS {table}" for table in COUNTED))
    return dict(row)


async def run_state(pool, run_id: str) -> tuple:  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        run = await conn.fetchrow("SELECT status, last_seq, hitl_state, updated_at FROM runs "
                                  "WHERE id = $1", uuid.UUID(run_id))
        gates = await conn.fetch("SELECT id, status, decision, updated_at FROM hitl_requests "
                                 "WHERE run_id = $1 ORDER BY created_at", uuid.UUID(run_id))
    return tuple(run.values()), [tuple(g.values()) for g in gates]


async def settled_run(api: httpx.AsyncClient, pool) -> str:  # type: ignore[no-untyped-def]
    """A run waiting at its gate, whose workflow writes nothing more until decided."""
    run_id = await start_run(api, gates=[CHECKPOINT])
    await wait_pending(api, run_id, CHECKPOINT)
    seen: list[dict] = []

    async def stable() -> bool:
        seen.append(await counts(pool))
        return len(seen) > 2 and seen[-1] == seen[-3]
    await eventually(stable, interval=0.1)
    return run_id


def assert_error_shape(response: httpx.Response, status: int, code: str, what: str) -> None:
    assert response.status_code == status, f"{what}: {response.status_code} {response.text}"
    assert response.headers["content-type"].startswith("application/json"), what
    body = response.json()
    assert set(body) == {"error"}, f"{what}: {body}"
    error = body["error"]
    assert set(error) <= {"code", "message", "details"}, f"{what}: {error}"
    assert error["code"] == code, f"{what}: {error}"
    assert isinstance(error["message"], str) and error["message"], f"{what}: {error}"
    if status == 422 and code == "invalid_request" and "details" in error:
        assert all({"loc", "msg", "type"} <= set(d) for d in error["details"]), what


def _chunks(data: bytes, size: int = 64 * 1024):  # type: ignore[no-untyped-def]
    for start in range(0, len(data), size):
        yield data[start:start + size]


async def _chunked(data: bytes) -> AsyncIterator[bytes]:
    for chunk in _chunks(data):
        yield chunk


JSON = {"Content-Type": "application/json"}
RUN_BODY = {"kind": "validation", "input": {"entrepreneur_input": IDEA}}
BIG = 256 * 1024 + 1

# (what, method, path, request kwargs, status, code). {run} is a run waiting at its gate.
CASES: list[tuple[str, str, str, dict[str, Any], int, str]] = [
    # Malformed JSON bodies.
    ("truncated JSON", "post", "/runs",
     {"content": b'{"kind": "validation", "input": {', "headers": JSON}, 422, "invalid_request"),
    ("trailing garbage", "post", "/runs",
     {"content": json.dumps(RUN_BODY).encode() + b" }", "headers": JSON},
     422, "invalid_request"),
    ("JSON null", "post", "/runs", {"content": b"null", "headers": JSON}, 422,
     "invalid_request"),
    ("JSON array", "post", "/runs", {"content": b"[]", "headers": JSON}, 422, "invalid_request"),
    ("JSON string", "post", "/runs", {"content": b'"run"', "headers": JSON}, 422,
     "invalid_request"),
    ("empty body", "post", "/runs", {"content": b"", "headers": JSON}, 422, "invalid_request"),
    ("not UTF-8", "post", "/runs", {"content": b'{"kind": "\xff\xfe"}', "headers": JSON},
     422, "invalid_request"),
    ("NUL in a string", "post", "/runs",
     {"content": json.dumps({"kind": "validation", "input": {
         "entrepreneur_input": IDEA + "\u0000"}}).encode(), "headers": JSON},
     422, "invalid_request"),
    ("NUL in a key", "post", "/runs",
     {"content": b'{"kind": "validation", "input": {"entrepreneur_input\\u0000": "x"}}',
      "headers": JSON}, 422, "invalid_request"),
    ("lone surrogate", "post", "/runs",
     {"content": json.dumps({"kind": "validation", "input": {
         "entrepreneur_input": IDEA + "\ud800"}}).encode(), "headers": JSON},
     422, "invalid_request"),
    ("nested 100,000 deep", "post", "/runs",
     {"content": b"[" * 100_000 + b"]" * 100_000, "headers": JSON}, 422, "invalid_request"),
    ("NUL in decision feedback", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve", "feedback": "ok\u0000"}}, 422, "invalid_request"),
    # Oversized bodies: declared, undeclared (chunked), and on a decision.
    ("declared oversize", "post", "/runs",
     {"content": b"{" + b" " * BIG + b"}", "headers": JSON}, 413, "payload_too_large"),
    ("chunked oversize", "post", "/runs", {"content": "chunked", "headers": JSON},
     413, "payload_too_large"),
    ("bogus Content-Length", "post", "/runs",
     {"content": json.dumps(RUN_BODY).encode(),
      "headers": {**JSON, "Content-Length": "-1"}}, 413, "payload_too_large"),
    ("oversize decision", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve", "feedback": "x" * BIG}}, 413, "payload_too_large"),
    ("feedback over 10,000 chars", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve", "feedback": "x" * 10_001}}, 422, "invalid_request"),
    ("idea over 10,000 chars", "post", "/runs",
     {"json": {"kind": "validation", "input": {"entrepreneur_input": "x" * 10_001}}},
     422, "invalid_request"),
    # Wrong content types.
    ("form-encoded", "post", "/runs",
     {"content": b"kind=validation", "headers": {
         "Content-Type": "application/x-www-form-urlencoded"}}, 415, "unsupported_media_type"),
    ("multipart", "post", "/runs",
     {"files": {"kind": ("kind.json", json.dumps(RUN_BODY).encode())}},
     415, "unsupported_media_type"),
    ("XML", "post", "/runs", {"content": b"<run/>", "headers": {
        "Content-Type": "application/xml"}}, 415, "unsupported_media_type"),
    ("JSON-ish type", "post", "/runs", {"content": json.dumps(RUN_BODY).encode(),
                                        "headers": {"Content-Type": "application/jsonx"}},
     415, "unsupported_media_type"),
    ("no content type", "post", "/runs",
     {"content": json.dumps(RUN_BODY).encode(), "headers": {"Content-Type": ""}},
     415, "unsupported_media_type"),
    ("text decision", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"content": b"approve", "headers": {"Content-Type": "text/plain"}},
     415, "unsupported_media_type"),
    # Huge and out-of-range limits, negative and absurd after_seq.
    ("events limit 1001", "get", "/runs/{run}/events?limit=1001", {}, 422, "invalid_request"),
    ("events limit 0", "get", "/runs/{run}/events?limit=0", {}, 422, "invalid_request"),
    ("events limit beyond int64", "get", "/runs/{run}/events?limit=" + "9" * 30, {}, 422,
     "invalid_request"),
    ("events limit float", "get", "/runs/{run}/events?limit=1e3", {}, 422, "invalid_request"),
    ("after_seq -1", "get", "/runs/{run}/events?after_seq=-1", {}, 422, "invalid_request"),
    ("after_seq below int64", "get",
     "/runs/{run}/events?after_seq=-9223372036854775809", {}, 422, "invalid_request"),
    ("after_seq beyond bigint", "get", f"/runs/{{run}}/events?after_seq={2**63}", {}, 422,
     "invalid_request"),
    ("after_seq text", "get", "/runs/{run}/events?after_seq=abc", {}, 422, "invalid_request"),
    ("stream after_seq -1", "get", "/runs/{run}/events/stream?after_seq=-1", {}, 422,
     "invalid_request"),
    ("stream Last-Event-ID -5", "get", "/runs/{run}/events/stream",
     {"headers": {"Last-Event-ID": "-5"}}, 422, "invalid_request"),
    ("runs limit 201", "get", "/runs?limit=201", {}, 422, "invalid_request"),
    ("runs limit -1", "get", "/runs?limit=-1", {}, 422, "invalid_request"),
    ("inbox limit 501", "get", "/decisions?limit=501", {}, 422, "invalid_request"),
    ("artifacts step -1", "get", "/runs/{run}/artifacts?step=-1", {}, 422, "invalid_request"),
    ("artifacts step beyond int32", "get", f"/runs/{{run}}/artifacts?step={2**31}", {}, 422,
     "invalid_request"),
    ("cursor not base64", "get", "/runs?cursor=!!!", {}, 422, "invalid_cursor"),
    ("cursor of garbage", "get", "/runs?cursor=Z2FyYmFnZQ==", {}, 422, "invalid_cursor"),
    # Ids that are not UUIDs, and UUIDs nobody has.
    ("run id 123", "get", "/runs/123", {}, 422, "invalid_request"),
    ("run id with suffix", "get", f"/runs/{uuid.uuid4()}x", {}, 422, "invalid_request"),
    ("run id with NUL", "get", "/runs/%00", {}, 422, "invalid_request"),
    ("run id path traversal", "get", "/runs/..%2F..%2Fetc%2Fpasswd", {}, 404, "not_found"),
    ("cancel non-UUID", "post", "/runs/not-a-uuid/cancel", {}, 422, "invalid_request"),
    ("decide non-UUID", "post", f"/runs/nope/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve"}}, 422, "invalid_request"),
    ("job id not UUID", "get", "/jobs/42", {}, 422, "invalid_request"),
    ("item id not UUID", "get", "/items/42/outputs", {}, 422, "invalid_request"),
    ("unknown run", "post", f"/runs/{uuid.uuid4()}/cancel", {}, 404, "run_not_found"),
    ("unknown job", "post", f"/jobs/{uuid.uuid4()}/pause", {}, 404, "job_not_found"),
    ("unknown item", "get", f"/items/{uuid.uuid4()}", {}, 404, "item_not_found"),
    ("a validation run is no job", "get", "/jobs/{run}", {}, 404, "job_not_found"),
    ("checkpoint upper case", "post", "/runs/{run}/decisions/APPROVE",
     {"json": {"decision": "approve"}}, 422, "invalid_request"),
    ("checkpoint too long", "post", "/runs/{run}/decisions/" + "a" * 201,
     {"json": {"decision": "approve"}}, 422, "invalid_request"),
    ("artifact not a hash", "get", "/artifacts/abc", {}, 422, "invalid_request"),
    # Unknown kinds, missing or mistyped fields, extra fields (mass assignment).
    ("kind in capitals", "post", "/runs", {"json": {**RUN_BODY, "kind": "Validation"}}, 422,
     "invalid_request"),
    ("kind missing", "post", "/runs", {"json": {"input": RUN_BODY["input"]}}, 422,
     "invalid_request"),
    ("kind null", "post", "/runs", {"json": {**RUN_BODY, "kind": None}}, 422,
     "invalid_request"),
    ("kind a number", "post", "/runs", {"json": {**RUN_BODY, "kind": 1}}, 422,
     "invalid_request"),
    ("list filter unknown kind", "get", "/runs?kind=nope", {}, 422, "invalid_request"),
    ("owner smuggled in", "post", "/runs", {"json": {**RUN_BODY, "owner": "mallory"}}, 422,
     "invalid_request"),
    ("status smuggled into input", "post", "/runs",
     {"json": {"kind": "validation", "input": {**RUN_BODY["input"], "status": "completed"}}},
     422, "invalid_request"),
    ("unknown gate", "post", "/runs",
     {"json": {"kind": "validation", "input": {**RUN_BODY["input"], "gates": ["approve_all"]}}},
     422, "invalid_request"),
    ("expiry policy unknown", "post", "/runs",
     {"json": {"kind": "validation", "input": {**RUN_BODY["input"],
                                               "expiry_policy": "never"}}},
     422, "invalid_request"),
    ("retries out of range", "post", "/runs",
     {"json": {"kind": "validation", "input": {**RUN_BODY["input"], "max_phase_retries": 99}}},
     422, "invalid_request"),
    ("gate timeout zero", "post", "/runs",
     {"json": {"kind": "validation", "input": {**RUN_BODY["input"],
                                               "gate_timeout_seconds": 0}}},
     422, "invalid_request"),
    ("batch template that does not parse", "post", "/runs",
     {"json": {"kind": "batch", "input": {"name": "x", "items": [{"a": 1}], "steps": [
         {"name": "s", "template": "{{ item.a "}]}}}, 422, "invalid_request"),
    ("mobile package with a slash", "post", "/runs",
     {"json": {"kind": "mobile_agent", "input": {"app_package": "../../etc"}}}, 422,
     "invalid_request"),
    ("decided_by smuggled in", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve", "decided_by": "mallory"}}, 422, "invalid_request"),
    ("decision empty", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": ""}}, 422, "invalid_request"),
    ("decision a list", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": ["approve", "reject"]}}, 422, "invalid_request"),
    ("request_id not a UUID", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve", "request_id": "1"}}, 422, "invalid_request"),
    ("unknown option", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "maybe"}}, 422, "unknown_option"),
    ("stale request id", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve", "request_id": str(uuid.uuid4())}}, 409, "stale_request"),
    ("stale digest", "post", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve", "digest": "0" * 64}}, 409, "stale_request"),
    ("gate not opened yet", "post", "/runs/{run}/decisions/approve_vpc_completion",
     {"json": {"decision": "approve"}}, 404, "checkpoint_not_found"),
    ("Idempotency-Key with a space", "post", "/runs",
     {"json": RUN_BODY, "headers": {"Idempotency-Key": "a b"}}, 422, "invalid_request"),
    ("Idempotency-Key too long", "post", "/runs",
     {"json": RUN_BODY, "headers": {"Idempotency-Key": "k" * 201}}, 422, "invalid_request"),
    # Paths and methods that do not exist.
    ("unknown path", "get", "/admin", {}, 404, "not_found"),
    ("DELETE a run", "delete", "/runs/{run}", {}, 405, "method_not_allowed"),
    ("PUT a decision", "put", f"/runs/{{run}}/decisions/{CHECKPOINT}",
     {"json": {"decision": "approve"}}, 405, "method_not_allowed"),
]


async def test_refused_requests_are_precise_and_write_nothing(api, pool):
    run_id = await settled_run(api, pool)
    before, state = await counts(pool), await run_state(pool, run_id)
    for what, method, path, kwargs, status, code in CASES:
        kwargs = dict(kwargs)
        headers = {**auth(), **kwargs.pop("headers", {})}
        if kwargs.get("content") == "chunked":
            kwargs["content"] = _chunked(b"{" + b" " * BIG + b"}")
        if headers.get("Content-Type") == "":
            del headers["Content-Type"]
        response = await api.request(method.upper(), path.replace("{run}", run_id),
                                     headers=headers, **kwargs)
        assert_error_shape(response, status, code, what)
    assert await counts(pool) == before
    assert await run_state(pool, run_id) == state


def _token(claims: dict[str, Any], key: str | None = SECRET, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=algorithm)


NOW = int(time.time())
GOOD = {"sub": "alice", "iat": NOW, "exp": NOW + 3600}
BAD_AUTH: list[tuple[str, str | None, str]] = [
    ("no header", None, "unauthenticated"),
    ("empty bearer", "Bearer ", "unauthenticated"),
    ("Basic scheme", "Basic YWxpY2U6cGFzcw==", "unauthenticated"),
    ("token without scheme", _token(GOOD), "unauthenticated"),
    ("garbage token", "Bearer not.a.token", "invalid_token"),
    ("expired", f"Bearer {_token({**GOOD, 'exp': NOW - 60})}", "token_expired"),
    ("wrongly signed", f"Bearer {_token(GOOD, 'another-secret-0123456789-0123456789')}",
     "invalid_token"),
    ("alg=none", f"Bearer {_token(GOOD, None, 'none')}", "invalid_token"),
    ("HS512 with the right secret", f"Bearer {_token(GOOD, SECRET, 'HS512')}",
     "invalid_token"),
    ("signature stripped", "Bearer " + _token(GOOD).rpartition(".")[0] + ".", "invalid_token"),
    ("payload swapped", "Bearer " + ".".join([
        _token(GOOD).split(".")[0], _token({**GOOD, "sub": "mallory"}).split(".")[1],
        _token(GOOD).split(".")[2]]), "invalid_token"),
    ("no exp", f"Bearer {_token({'sub': 'alice'})}", "invalid_token"),
    ("no sub", f"Bearer {_token({'exp': NOW + 3600})}", "invalid_token"),
    ("empty sub", f"Bearer {_token({**GOOD, 'sub': ''})}", "invalid_token"),
    ("sub not a string", f"Bearer {_token({**GOOD, 'sub': 7})}", "invalid_token"),
    ("unknown role", f"Bearer {_token({**GOOD, 'role': 'admin'})}", "invalid_token"),
    ("not valid yet", f"Bearer {_token({**GOOD, 'nbf': NOW + 3600})}", "invalid_token"),
    ("issued in the future", f"Bearer {_token({**GOOD, 'iat': NOW + 3600})}", "invalid_token"),
]


@pytest.mark.parametrize("what,header,code", BAD_AUTH, ids=[c[0] for c in BAD_AUTH])
async def test_bad_tokens_are_401_and_write_nothing(api, pool, what, header, code):
    headers = {"Authorization": header} if header else {}
    before = await counts(pool)
    run_id = str(uuid.uuid4())
    for method, path, body in [("GET", "/runs", None), ("POST", "/runs", RUN_BODY),
                               ("GET", "/decisions", None),
                               ("POST", f"/runs/{run_id}/decisions/{CHECKPOINT}",
                                {"decision": "approve"}),
                               ("POST", f"/runs/{run_id}/cancel", None)]:
        response = await api.request(method, path, headers=headers, json=body)
        assert_error_shape(response, 401, code, f"{what}: {method} {path}")
    assert await counts(pool) == before


async def test_bad_token_cannot_touch_a_real_run(api, pool):
    run_id = await settled_run(api, pool)
    before, state = await counts(pool), await run_state(pool, run_id)
    for _, header, code in BAD_AUTH:
        headers = {"Authorization": header} if header else {}
        for method, path, body in [
                ("GET", f"/runs/{run_id}", None), ("POST", f"/runs/{run_id}/cancel", None),
                ("POST", f"/runs/{run_id}/decisions/{CHECKPOINT}", {"decision": "approve"}),
                ("POST", f"/runs/{run_id}/decisions/{CHECKPOINT}/reopen", None)]:
            response = await api.request(method, path, headers=headers, json=body)
            assert_error_shape(response, 401, code, f"{header}: {method} {path}")
    assert await counts(pool) == before
    assert await run_state(pool, run_id) == state
    # The same run is still alice's to decide.
    decided = await api.post(f"/runs/{run_id}/decisions/{CHECKPOINT}",
                             json={"decision": "approve"}, headers=auth())
    assert decided.status_code == 200 and decided.json()["decided_by"] == "alice"
