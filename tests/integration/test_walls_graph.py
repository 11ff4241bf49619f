"""The graph picture embeds only screenshots its reader may fetch (issue 25, review): a
screen is shared by every run of the app that saw it, with the first run's screenshot."""

from __future__ import annotations

import base64
import uuid

from tests.helpers import NOTES
from tests.inprocess_api import auth, finished
from waystation.activities.artifacts import LocalArtifactStore


async def _explore(api, user: str) -> str:
    response = await api.post("/runs", headers=auth(user), json={
        "kind": "mobile_agent", "input": {"app_package": NOTES, "driver": "simulator",
                                          "max_steps": 4, "sensitive_actions": "skip"}})
    assert response.status_code == 201, response.text
    run_id = response.json()["run_id"]
    assert (await finished(api, run_id, user))["status"] == "completed"
    return run_id


async def test_another_users_screenshot_is_not_in_my_picture(api, settings, pool):
    alice_run = await _explore(api, "alice")
    bob_run = await _explore(api, "bob")
    # What alice typed, on the screenshot the app's shared screens now show.
    private = b"\x89PNG alice typed her card number " + uuid.uuid4().bytes
    sha = LocalArtifactStore(settings.artifact_path).put(private)
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO run_artifacts (run_id, step, kind, sha256, content_type, size_bytes) "
            "VALUES ($1, 999, 'screenshot', $2, 'image/png', $3)",
            uuid.UUID(alice_run), sha, len(private))
        await conn.execute("UPDATE screens SET screenshot_sha = $2 WHERE app_package = $1",
                           NOTES, sha)
    embedded = base64.b64encode(private).decode()
    for path in (f"/runs/{bob_run}/graph?format=html", f"/apps/{NOTES}/graph?format=html"):
        page = await api.get(path, headers=auth("bob"))
        assert page.status_code == 200 and embedded not in page.text, path
        assert (await api.get(f"/artifacts/{sha}", headers=auth("bob"))).status_code == 404
    mine = await api.get(f"/runs/{alice_run}/graph?format=html", headers=auth("alice"))
    assert embedded in mine.text
