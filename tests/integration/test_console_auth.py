"""Console sign-in and sessions over HTTP: one-time codes, the session cookie, CSRF on
changes, sign-out, and the snapshot history and search the console reads. Bearer tokens keep
working exactly as before."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest_asyncio

from tests.console_helpers import login_path
from tests.helpers import new_validation_run
from waystation.api.app import create_app
from waystation.api.auth import SESSION_COOKIE, issue_token
from waystation.persistence.writes import ReadModelWrite, SnapshotWrite, apply_write
from waystation.settings import Settings
from waystation.testing import free_port

SECRET = "console-secret-0123456789-0123456789-abcdef"


@pytest_asyncio.fixture
async def app_settings(migrated_url: str) -> Settings:
    # Temporal is never reached here: every request below is refused or answered first.
    return Settings(database_url=migrated_url, jwt_secret=SECRET,
                    temporal_address=f"127.0.0.1:{free_port()}",
                    temporal_ui_url="http://temporal-ui.example:8080/")


@pytest_asyncio.fixture
async def client(app_settings: Settings, pool) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(app_settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


async def signed_in(client: httpx.AsyncClient, pool, user: str = "alice") -> str:
    """Sign `client` in with a fresh link; returns the session's CSRF token."""
    response = await client.get(await login_path(pool, user))
    assert response.status_code == 303, response.text
    session = (await client.get("/console/session")).json()
    return session["csrf_token"]


async def test_login_link_sets_an_httponly_lax_cookie_and_redirects_without_the_code(
        client, pool):
    path = await login_path(pool, "alice")
    response = await client.get(path)
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["referrer-policy"] == "no-referrer"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # WAYSTATION_ENV=dev serves plain-HTTP localhost
    session = (await client.get("/console/session")).json()
    assert session["user"] == "alice" and session["role"] == "user"
    assert len(session["csrf_token"]) >= 32
    assert session["temporal_ui_url"] == "http://temporal-ui.example:8080"
    assert "validation" in session["kinds"]
    # Only hashes are stored: neither the code nor the session id is in the tables.
    code = path.split("code=")[1]
    session_id = client.cookies[SESSION_COOKIE]
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT code_hash AS h FROM console_login_codes "
                                "UNION ALL SELECT id_hash FROM console_sessions")
    assert rows and all(code not in r["h"] and session_id not in r["h"] for r in rows)


async def test_a_code_signs_in_once_and_an_expired_or_unknown_one_never(client, pool):
    path = await login_path(pool, "alice")
    assert (await client.get(path)).status_code == 303
    client.cookies.clear()
    again = await client.get(path)
    assert again.status_code == 401 and again.json()["error"]["code"] == "invalid_login_code"
    assert "set-cookie" not in again.headers

    expired = await login_path(pool, "alice")
    async with pool.acquire() as conn:
        await conn.execute("UPDATE console_login_codes SET expires_at = now() - interval '1 s' "
                           "WHERE used_at IS NULL")
    refused = await client.get(expired)
    assert refused.status_code == 401
    unknown = await client.get("/console/login?code=" + "A" * 43)
    assert unknown.status_code == 401
    malformed = await client.get("/console/login?code=short")
    assert malformed.status_code == 422 and malformed.json()["error"]["code"] == "invalid_request"
    assert (await client.get("/console/session")).status_code == 401


async def test_cookie_changes_need_the_csrf_header(client, pool):
    run = await new_validation_run(pool, owner="alice")
    async with pool.acquire() as conn:
        await conn.execute("UPDATE runs SET status = 'completed' WHERE id = $1", run.run_id)
    csrf = await signed_in(client, pool)
    # Reads need no token; the cookie alone is enough.
    assert (await client.get(f"/runs/{run.run_id}")).status_code == 200
    for headers in ({}, {"X-CSRF-Token": "not-the-token"}):
        refused = await client.post(f"/runs/{run.run_id}/cancel", headers=headers)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "csrf_failed"
        refused = await client.post(f"/runs/{run.run_id}/decisions/x", headers=headers,
                                    json={"decision": "approve"})
        assert refused.status_code == 403
    # With the token the request gets through to the route, which needs Temporal (not
    # running here): 503, not 403.
    passed = await client.post(f"/runs/{run.run_id}/cancel", headers={"X-CSRF-Token": csrf})
    assert passed.status_code == 503 and passed.json()["error"]["code"] == "unavailable"


async def test_bearer_tokens_work_as_before_even_beside_a_cookie(client, pool):
    run = await new_validation_run(pool, owner="bob")
    bearer = {"Authorization": f"Bearer {issue_token(SECRET, 'bob')}"}
    client.cookies.set(SESSION_COOKIE, "a-session-that-does-not-exist")
    assert (await client.get(f"/runs/{run.run_id}", headers=bearer)).status_code == 200
    # A bearer change needs no CSRF token (no browser sends it on its own): it reaches the
    # route, which needs Temporal (not running here).
    through = await client.post(f"/runs/{run.run_id}/cancel", headers=bearer)
    assert through.status_code == 503
    # The stale cookie alone is refused plainly.
    stale = await client.get("/runs")
    assert stale.status_code == 401 and stale.json()["error"]["code"] == "session_expired"


async def test_a_session_sees_only_its_users_runs(client, pool):
    mine = await new_validation_run(pool, owner="carol")
    theirs = await new_validation_run(pool, owner="dave")
    await signed_in(client, pool, "carol")
    ids = {r["run_id"] for r in (await client.get("/runs?limit=200")).json()["runs"]}
    assert str(mine.run_id) in ids and str(theirs.run_id) not in ids
    assert (await client.get(f"/runs/{theirs.run_id}")).status_code == 404
    assert (await client.get(f"/runs/{theirs.run_id}/snapshots")).status_code == 404


async def test_sign_out_ends_the_session(client, pool):
    csrf = await signed_in(client, pool)
    session_id = client.cookies[SESSION_COOKIE]
    assert (await client.post("/console/logout")).status_code == 403  # CSRF applies here too
    out = await client.post("/console/logout", headers={"X-CSRF-Token": csrf})
    assert out.status_code == 204
    assert 'waystation_session=""' in out.headers["set-cookie"]
    client.cookies.set(SESSION_COOKIE, session_id)  # a copy kept by somebody
    after = await client.get("/runs")
    assert after.status_code == 401 and after.json()["error"]["code"] == "session_expired"


async def test_snapshot_history_and_one_snapshot_by_ordinal(client, pool):
    run = await new_validation_run(pool, owner="alice")
    async with pool.acquire() as conn:
        await apply_write(conn, ReadModelWrite(run_id=run.run_id, snapshots=[
            SnapshotWrite(step_ordinal=1, label="phase 0 completed", phase=0, state={"a": 1}),
            SnapshotWrite(step_ordinal=2, label="gate review", phase=1, state={"a": 2})]))
    await signed_in(client, pool)
    history = (await client.get(f"/runs/{run.run_id}/snapshots")).json()
    assert [(s["step_ordinal"], s["label"]) for s in history["snapshots"]] == [
        (1, "phase 0 completed"), (2, "gate review")]
    assert "state" not in history["snapshots"][0]
    one = (await client.get(f"/runs/{run.run_id}/snapshots/2")).json()
    assert one["state"] == {"a": 2} and one["label"] == "gate review"
    assert (await client.get(f"/runs/{run.run_id}/snapshots/latest")).json()["step_ordinal"] == 2
    missing = await client.get(f"/runs/{run.run_id}/snapshots/3")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "snapshot_not_found"
    for bad in ("0", "-1", "99999999999", "x"):
        assert (await client.get(f"/runs/{run.run_id}/snapshots/{bad}")).status_code == 422


async def test_runs_search(client, pool):
    needle = f"needle-{uuid.uuid4().hex[:8]}"
    found = await new_validation_run(pool, owner="erin", project_id=needle)
    await new_validation_run(pool, owner="erin")
    await signed_in(client, pool, "erin")
    runs = (await client.get("/runs", params={"q": needle.upper()})).json()["runs"]
    assert [r["run_id"] for r in runs] == [str(found.run_id)]
    by_id = (await client.get("/runs", params={"q": str(found.run_id)[:8]})).json()["runs"]
    assert str(found.run_id) in {r["run_id"] for r in by_id}
    assert (await client.get("/runs", params={"q": "a\x00b"})).status_code == 422


async def test_console_page_and_static_files(client):
    page = await client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    # One policy, the console's own (two would both be enforced).
    [csp] = page.headers.get_list("content-security-policy")
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert '<main id="main"' in page.text
    script = await client.get("/console/static/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert (await client.get("/console/static/nope.js")).status_code == 404
    # The JSON API keeps its paths and its schema has no console plumbing in it.
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/runs/{run_id}/snapshots" in paths and "/console/login" not in paths


def test_console_link_command_prints_a_working_link(migrated_url):
    env = {**os.environ, "DATABASE_URL": migrated_url, "WAYSTATION_CONSOLE_URL":
           "https://console.example/", "WAYSTATION_JWT_SECRET": SECRET}
    done = subprocess.run([sys.executable, "-m", "waystation", "console-link", "--user", "zoe"],
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    url = done.stdout.strip()
    assert url.startswith("https://console.example/console/login?code=")
    assert len(done.stdout.strip().splitlines()) == 1
