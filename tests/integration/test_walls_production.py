"""Safe in production by default (issue 25): dev secrets refused at start, /metrics not open
to anybody and not an aggregate per scrape."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from pydantic import ValidationError

from tests.fault_helpers import SECRET, api_settings, auth
from waystation.api.auth import issue_token
from waystation.api.services import metrics as metrics_service
from waystation.persistence.metrics import read_figures
from waystation.persistence.sealing import new_key
from waystation.settings import DEV_JWT_SECRET, DEV_SECRETS_KEY, Settings
from waystation.testing import InProcessApi

TOKEN = "metrics-token-0123456789-0123456789"
SERVICE = {"Authorization": f"Bearer {issue_token(SECRET, 'ops', 'service')}"}


@pytest.mark.parametrize(("overrides", "refused"), [
    ({"secrets_key": new_key()}, "WAYSTATION_JWT_SECRET must be set"),
    ({"jwt_secret": "p" * 40, "secrets_key": DEV_SECRETS_KEY}, "WAYSTATION_SECRETS_KEY must be"),
    ({"jwt_secret": "p" * 40, "secrets_key": f"{new_key()},{DEV_SECRETS_KEY}"},
     "WAYSTATION_SECRETS_KEY must be"),
])
def test_production_refuses_to_start_with_a_dev_secret(overrides, refused) -> None:
    with pytest.raises(ValidationError, match=refused):
        Settings(env="production", **overrides)
    assert Settings(env="production", jwt_secret="p" * 40, secrets_key=new_key())
    assert Settings(env="dev").jwt_secret == DEV_JWT_SECRET


@pytest.mark.parametrize("command", ["api", "worker", "up"])
def test_the_processes_refuse_to_start_with_the_dev_secret_saying_why(command) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAYSTATION_")}
    env.update(WAYSTATION_ENV="production", WAYSTATION_JWT_SECRET=DEV_JWT_SECRET,
               WAYSTATION_SECRETS_KEY=new_key())
    done = subprocess.run([str(Path(sys.executable).parent / "waystation"), command],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    refusal = "waystation: refusing to start: WAYSTATION_JWT_SECRET must be set outside"
    assert refusal in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


async def _served(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    api = InProcessApi(settings)
    await api.start()
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
            yield http
    finally:
        await api.stop()


@pytest_asyncio.fixture
async def production(migrated_url, dev_env, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    address = dev_env.client.service_client.config.target_host
    async for http in _served(api_settings(migrated_url, address, task_queue,
                                           env="production", secrets_key=new_key())):
        yield http


@pytest_asyncio.fixture
async def with_token(migrated_url, dev_env, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    address = dev_env.client.service_client.config.target_host
    async for http in _served(api_settings(migrated_url, address, task_queue,
                                           metrics_token=TOKEN)):
        yield http


async def test_production_metrics_need_the_service_role(production) -> None:
    assert (await production.get("/metrics")).status_code == 401
    refused = await production.get("/metrics", headers=auth("alice"))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    served = await production.get("/metrics", headers=SERVICE)
    assert served.status_code == 200 and "waystation_read_model_up 1.0" in served.text


async def test_a_metrics_token_is_required_when_set(with_token) -> None:
    for headers in ({}, SERVICE, {"Authorization": "Bearer wrong"}):
        refused = await with_token.get("/metrics", headers=headers)
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["message"].startswith("authorization:")
    served = await with_token.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert served.status_code == 200


async def test_scrapes_within_the_cache_interval_read_the_tables_once(
        migrated_url, dev_env, task_queue, monkeypatch) -> None:
    reads: list[object] = []

    async def counted(*args: object) -> object:
        reads.append(args)
        return await read_figures(*args)
    monkeypatch.setattr(metrics_service, "read_figures", counted)
    address = dev_env.client.service_client.config.target_host
    settings = api_settings(migrated_url, address, task_queue, metrics_cache_seconds=600)
    async for http in _served(settings):
        scrapes = await asyncio.gather(*(http.get("/metrics") for _ in range(5)))
        assert all(s.status_code == 200 and "waystation_runs" in s.text for s in scrapes)
    assert len(reads) == 1
