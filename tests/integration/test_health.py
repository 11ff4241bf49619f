"""Liveness and readiness: an API whose Temporal is down is alive but not ready."""

from __future__ import annotations

import httpx

from tests.fault_helpers import TemporalDevServer, api_settings
from waystation.testing import InProcessApi


async def test_readyz_503_while_temporal_is_down_and_livez_200(migrated_url, tmp_path):
    temporal = TemporalDevServer(tmp_path)
    await temporal.start()
    api = InProcessApi(api_settings(migrated_url, temporal.address, "tq-health"))
    await api.start()
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json() == {"status": "ok", "database": "ok", "temporal": "ok"}

            temporal.stop()
            for path in ("/readyz", "/healthz"):
                down = await http.get(path)
                assert down.status_code == 503, down.text
                assert down.json() == {"status": "degraded", "database": "ok",
                                       "temporal": "unavailable"}
                assert int(down.headers["Retry-After"]) > 0
            live = await http.get("/livez")
            assert live.status_code == 200 and live.json() == {"status": "ok"}

            await temporal.start()
            assert (await http.get("/readyz")).status_code == 200
    finally:
        await api.stop()
        temporal.stop()
