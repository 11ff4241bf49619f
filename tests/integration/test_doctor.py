"""`waystation doctor` runs a chain of empty activities on the configured cluster and reports
how long its workflow tasks waited after each activity, then how late a few 1 ms timers (a
decision's answer break) fired (issue 39): fine on the project's dev server, stalled and late
on one with Temporal's defaults."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import WorkflowEnvironment

from waystation import cli
from waystation.engine_settings import ENGINE_SETTINGS, dev_server_args
from waystation.temporal_client import DATA_CONVERTER
from waystation.testing import installed_binary


def doctor(monkeypatch: pytest.MonkeyPatch, env: WorkflowEnvironment,
           capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str]:
    monkeypatch.setenv("TEMPORAL_ADDRESS", env.client.service_client.config.target_host)
    monkeypatch.setenv("TEMPORAL_NAMESPACE", env.client.namespace)
    status = cli.main(["doctor", *flags])
    return status, capsys.readouterr().out


async def test_doctor_finds_no_stall_on_the_projects_dev_server(
        dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    status, out = await asyncio.to_thread(doctor, monkeypatch, dev_env, capsys)
    assert status == 0, out
    assert "100 empty activities in a row" in out
    assert "ms timer (a decision's answer break) fired" in out
    assert "ok: the history service does not hold workflow tasks or short timers up" in out


async def doctor_on(engine: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                    capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The doctor's report on a dev server of its own with these dynamic config values."""
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER, dev_server_existing_path=installed_binary("temporal"),
        dev_server_extra_args=dev_server_args(engine=engine))
    try:
        return await asyncio.to_thread(doctor, monkeypatch, env, capsys)
    finally:
        await env.shutdown()


# A second dev server, with Temporal's defaults, for one check: the slow tier.
@pytest.mark.slow
async def test_doctor_finds_the_stall_on_a_dev_server_with_temporals_defaults(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = await doctor_on({}, monkeypatch, capsys)
    assert status == 1, out
    assert "stalled: above 20 ms, the history service's transfer queue is throttled" in out
    assert "late timers: above 100 ms, short timers wait for " \
        "history.timerProcessorMaxTimeShift" in out


# A cluster with the queue readers unthrottled but the timer shift at Temporal's default:
# the chain is fine, the answer break is a second late.
@pytest.mark.slow
async def test_doctor_finds_late_timers_where_only_the_shift_is_the_default(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    engine = {key: value for key, value in ENGINE_SETTINGS.items()
              if key != "history.timerProcessorMaxTimeShift"}
    status, out = await doctor_on(engine, monkeypatch, capsys)
    assert status == 1, out
    assert "stalled" not in out
    late = float(out.split("(a decision's answer break) fired ")[1].split(" ms late")[0])
    assert late > 500, out
    assert "late timers: above 100 ms" in out


def test_doctor_refuses_a_chain_too_short_to_measure(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--activities", "1"]) == 2
    assert "--activities must be between 2 and 1000" in capsys.readouterr().err
