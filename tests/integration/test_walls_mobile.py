"""Mobile runs on real devices (issue 25, review): typed text cannot escape the device shell,
and users drive only the devices the operator lists."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from waystation_mobile.activities.adb import typing_commands
from waystation_mobile.settings import MobileSettings

from tests.helpers import NOTES
from tests.inprocess_api import SECRET, auth
from waystation.settings import Settings

# `input` stands in for the device's: it prints each argument it receives, bracketed.
FAKE_INPUT = 'input() { printf "[%s]" input "$@"; echo; }; '
ENTER, TAB = "[input][keyevent][66]", "[input][keyevent][61]"


def device_shell(command: list[str], cwd: Path) -> str:
    """What the device's `sh -c` makes of `adb shell <command...>` (adb joins with spaces)."""
    return subprocess.run(["sh", "-c", FAKE_INPUT + " ".join(command)], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.removesuffix("\n")


@pytest.mark.parametrize(("text", "typed"), [
    ("a b;touch pwned", ["[input][text][a%sb;touch%spwned]"]),
    ("$(touch pwned)", ["[input][text][$(touch%spwned)]"]),
    ("`touch pwned`", ["[input][text][`touch%spwned`]"]),
    ("it's \"quoted\" & | > x", ["[input][text][it's%s\"quoted\"%s&%s|%s>%sx]"]),
    ("line\ntouch pwned", ["[input][text][line]", ENTER, "[input][text][touch%spwned]"]),
    ("tab\there\n", ["[input][text][tab]", TAB, "[input][text][here]", ENTER]),
    ("* \\n", ["[input][text][*%s\\n]"]),
    ("cr\rbell\x07", ["[input][text][crbell]"]),
])
def test_typed_text_reaches_input_as_typed_and_runs_nothing(
        text: str, typed: list[str], tmp_path: Path) -> None:
    assert [device_shell(c, tmp_path) for c in typing_commands(text)] == typed
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def settings(migrated_url: str, dev_env, task_queue: str, tmp_path: Path) -> Settings:
    return Settings(database_url=migrated_url, jwt_secret=SECRET, temporal_task_queue=task_queue,
                    temporal_address=dev_env.client.service_client.config.target_host,
                    artifact_dir=tmp_path / "artifacts",
                    kind_settings=(MobileSettings(adb_devices="emulator-5554, lab-7"),))


def _adb_run(serial: str | None) -> dict:
    return {"kind": "mobile_agent", "input": {"app_package": NOTES, "driver": "adb",
                                              "device_serial": serial, "max_steps": 1,
                                              "max_errors": 0}}


async def test_users_name_only_listed_devices(api) -> None:
    before = (await api.get("/runs", headers=auth("eve"))).json()["runs"]
    for serial in ("R58M123ABC", None):
        refused = await api.post("/runs", headers=auth("eve"), json=_adb_run(serial))
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "device_not_allowed"
        assert error["message"].startswith("input.device_serial: ")
    assert (await api.get("/runs", headers=auth("eve"))).json()["runs"] == before
    listed = await api.post("/runs", headers=auth("eve"), json=_adb_run("lab-7"))
    assert listed.status_code == 201, listed.text
    operator = await api.post("/runs", headers=auth("ops", role="service"),
                              json=_adb_run("R58M123ABC"))
    assert operator.status_code == 201, operator.text


async def test_an_app_the_simulator_does_not_have_is_refused_at_start(api) -> None:
    """Not a run that retries its first step for ever: a 422 naming the field and the apps the
    simulator has, and nothing written."""
    before = (await api.get("/runs", headers=auth("eve"))).json()["runs"]
    refused = await api.post("/runs", headers=auth("eve"), json={
        "kind": "mobile_agent", "input": {"app_package": "com.example.nope"}})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith("input.app_package: the simulator has no app "
                                       "'com.example.nope'; bundled: ")
    assert NOTES in error["message"]
    assert error["details"][0]["loc"] == ["body", "input", "app_package"]
    assert (await api.get("/runs", headers=auth("eve"))).json()["runs"] == before
