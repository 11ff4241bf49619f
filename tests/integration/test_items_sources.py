"""A batch job's `items_path` only from allowed directories and URL prefixes, refused at submit
with a 422 that writes nothing, and checked again (redirects included) when a worker reads."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.kinds.batch.activities.items_source import ItemsSources, SourceRefused
from waystation.kinds.batch.activities.loading import ItemsUnreadable, read_chunks
from waystation.kinds.batch.settings import BatchSettings
from waystation.settings import Settings

SECRET = "items-secret-0123456789-0123456789-abcdef"
STEPS = [{"name": "echo", "template": "{{ item.text }}"}]


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    folder = tmp_path / "allowed"
    folder.mkdir()
    (folder / "items.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    (tmp_path / "secret.jsonl").write_text('{"text": "secret"}\n')
    (folder / "escape.jsonl").symlink_to(tmp_path / "secret.jsonl")
    return folder


def test_paths_only_under_allowed_directories(allowed: Path) -> None:
    sources = ItemsSources.parse(f" {allowed} ,", "")
    sources.check(str(allowed / "items.jsonl"))
    sources.check(str(allowed / "not-yet-written.jsonl"))
    for refused in (allowed.parent / "secret.jsonl", allowed / ".." / "secret.jsonl",
                    allowed / "escape.jsonl", Path("/etc/passwd"), Path(str(allowed) + "-x")):
        with pytest.raises(SourceRefused, match="WAYSTATION_ITEMS_DIRS"):
            sources.check(str(refused))
    with pytest.raises(SourceRefused, match="absolute"):
        sources.check("items.jsonl")
    with pytest.raises(SourceRefused):
        ItemsSources().check(str(allowed / "items.jsonl"))  # nothing configured: nothing


@pytest.mark.parametrize("url", [
    "https://data.example.com/jobs-secret/x.jsonl",
    "https://data.example.com.evil.net/jobs/x.jsonl",
    "http://data.example.com/jobs/x.jsonl",
    "https://data.example.com:8443/jobs/x.jsonl",
    "https://data.example.com/other/x.jsonl",
    "https://data.example.com/jobs/../admin/x.jsonl",
    "https://data.example.com/jobs/%2e%2e/admin",
    "https://user:pw@data.example.com/jobs/x.jsonl",
    "http://169.254.169.254/latest/meta-data/",
])
def test_urls_only_under_allowed_prefixes(url: str) -> None:
    sources = ItemsSources.parse("", "https://data.example.com/jobs")
    sources.check("https://data.example.com/jobs/x.jsonl")
    sources.check("HTTPS://DATA.example.com/jobs/deep/x.jsonl")
    with pytest.raises(SourceRefused):
        sources.check(url)


async def test_refused_at_submit_with_422_and_nothing_written(migrated_url, pool, dev_env,
                                                             allowed):
    settings = Settings(database_url=migrated_url, jwt_secret=SECRET,
                        temporal_address=dev_env.client.service_client.config.target_host,
                        kind_settings=(BatchSettings(items_dirs=str(allowed),
                                                     items_url_prefixes="https://data.example.com/j/"),))
    user = f"items-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {issue_token(SECRET, user)}"}
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://localhost") as http:
            for source in (str(allowed.parent / "secret.jsonl"), str(allowed / "escape.jsonl"),
                           "/etc/passwd", "http://127.0.0.1:5432/", "file:///etc/passwd",
                           "https://data.example.com/jobs/x.jsonl"):
                response = await http.post("/runs", headers=headers, json={
                    "kind": "batch", "input": {"name": "n", "items_path": source,
                                               "steps": STEPS}})
                assert response.status_code == 422, (source, response.text)
                error = response.json()["error"]
                assert error["message"].startswith("input.items_path: "), error
                assert error["details"][0]["loc"] == ["body", "input", "items_path"]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs WHERE owner = $1", user) == 0


class _Redirecting(BaseHTTPRequestHandler):
    """`/items/ok.jsonl` serves items; `/items/to-private` redirects to loopback."""

    def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
        if self.path == "/items/ok.jsonl":
            body = b'{"text": "a"}\n'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(302)
        self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/secret")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


async def test_worker_reads_allowed_url_and_refuses_redirect_to_private(http_server, allowed):
    sources = ItemsSources.parse(str(allowed), f"{http_server}/items/")
    chunks = [c async for c in read_chunks(f"{http_server}/items/ok.jsonl", 10, sources)]
    assert chunks == [[{"text": "a"}]]
    with pytest.raises(ItemsUnreadable, match="127.0.0.1 is not a public address"):
        _ = [c async for c in read_chunks(f"{http_server}/items/to-private", 10, sources)]
    # A file swapped for a symlink after submit is refused when the worker reads it.
    with pytest.raises(ItemsUnreadable, match="WAYSTATION_ITEMS_DIRS"):
        _ = [c async for c in read_chunks(str(allowed / "escape.jsonl"), 10, sources)]
    items = [c async for c in read_chunks(str(allowed / "items.jsonl"), 10, sources)]
    assert json.dumps(items) == json.dumps([[{"text": "a"}, {"text": "b"}]])

