"""Webhooks cannot reach the services beside Waystation, nor show their answers (issue 25,
item 4): loopback, private, CGNAT and unique-local targets are refused unless allowed (the
default only in dev), at registration (a literal address or a host resolving to one) and at
delivery; the delivery log keeps a status and its reason, never the answer's body."""

from __future__ import annotations

import ipaddress
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import asyncpg
import httpx
import pytest

from tests.helpers import IDEA, eventually, live_api
from tests.integration.test_webhooks import GATE, SECRET, auth, http  # noqa: F401 - the http fixture
from tests.webhook_receiver import Receiver
from waystation.activities.webhook_targets import refusal
from waystation.persistence.sealing import new_key
from waystation.settings import Settings

NEIGHBOURS = ["127.0.0.1", "10.1.2.3", "172.16.0.5", "192.168.1.1", "100.64.0.1",
              "100.127.255.254", "fc00::1", "fd12:3456::1", "::1", "::ffff:127.0.0.1",
              "2002:7f00:1::", "2002:a01:203::1"]  # 6to4 of 127.0.0.1 and 10.1.2.3
NEVER = ["169.254.169.254", "fe80::1", "0.0.0.0", "::", "224.0.0.1", "ff02::1"]


@pytest.mark.parametrize("address", NEIGHBOURS)
def test_neighbours_are_refused_unless_private_networks_are_allowed(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert "loopback or private" in (refusal(ip, private_networks=False) or "")
    assert refusal(ip, private_networks=True) is None


@pytest.mark.parametrize("address", NEVER)
def test_link_local_unspecified_and_multicast_are_refused_always(address: str) -> None:
    assert refusal(ipaddress.ip_address(address), private_networks=True) is not None


def test_private_networks_are_allowed_by_default_only_in_dev() -> None:
    production = dict(env="production", jwt_secret="p" * 40, secrets_key=new_key())
    assert not Settings(**production).webhooks_to_private_networks
    assert Settings(**production, webhook_private_networks=True).webhooks_to_private_networks
    assert Settings(env="dev").webhooks_to_private_networks


async def test_production_refuses_a_webhook_to_the_temporal_web_ui_naming_the_url(
        migrated_url, dev_env, pool, task_queue) -> None:
    user = f"prod-{uuid.uuid4().hex[:6]}"
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        env="production", secrets_key=new_key()) as api:
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as client:
            for url in ("http://127.0.0.1:8233/api/v1/namespaces", "http://localhost:8233/",
                        "http://100.64.0.1/hook", "http://[fd00::1]/hook"):
                refused = await client.post("/webhooks", headers=auth(user),
                                            json={"url": url, "events": ["gate.opened"]})
                assert refused.status_code == 422, (url, refused.text)
                error = refused.json()["error"]
                assert error["code"] == "webhook_url_refused"
                assert error["message"].startswith("url: ")
                [detail] = error["details"]
                assert detail["loc"] == ["body", "url"] and detail["msg"] in error["message"]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM webhooks WHERE owner = $1", user) == 0


async def _first_attempt_at(client: httpx.AsyncClient, pool: asyncpg.Pool, user: str,
                            url: str) -> tuple[uuid.UUID, str | None]:
    """`user`'s webhook to `url` and a gated run of theirs: the webhook, and the error its
    delivery's first attempt logged."""
    created = await client.post("/webhooks", headers=auth(user),
                                json={"url": url, "events": ["gate.opened"]})
    assert created.status_code == 201, created.text
    webhook_id = uuid.UUID(created.json()["webhook_id"])
    started = await client.post("/runs", headers=auth(user), json={
        "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
    assert started.status_code == 201, started.text

    async def first_attempt() -> str | None:
        async with pool.acquire() as conn:
            return await conn.fetchval(
                "SELECT a.error FROM webhook_attempts a JOIN webhook_deliveries d "
                "ON d.id = a.delivery_id WHERE d.webhook_id = $1 AND a.attempt = 1",
                webhook_id)
    return webhook_id, await eventually(first_attempt, timeout=30)


async def test_the_delivery_log_keeps_the_status_not_the_answers_body(http, pool):  # noqa: F811
    user = f"hooks-{uuid.uuid4().hex[:6]}"
    body = json.dumps({"message": "missing csrf token", "internal": "s3cr3t"}).encode()
    with Receiver(fail_first=1, fail_status=400, fail_body=body) as receiver:
        webhook_id, error = await _first_attempt_at(http, pool, user, receiver.url)
    assert error == "HTTP 400 Bad Request"
    log = (await http.get(f"/webhooks/{webhook_id}/deliveries", headers=auth(user))).json()
    assert "csrf" not in json.dumps(log) and "s3cr3t" not in json.dumps(log)


async def test_a_redirect_is_not_followed(http, pool):  # noqa: F811
    """A public receiver's 3xx cannot send the worker on to an address it never checked."""
    user = f"hooks-{uuid.uuid4().hex[:6]}"
    with Receiver() as inside:
        class Redirect(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(307)
                self.send_header("location", inside.url)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            _, error = await _first_attempt_at(
                http, pool, user, f"http://127.0.0.1:{server.server_port}/hook")
            assert error == "HTTP 307 Temporary Redirect"
        finally:
            server.shutdown()
            server.server_close()
    assert inside.received == []
