"""The mobile agent's step activity: act, observe, identify, persist, in one call.

One activity per step keeps a step to one Temporal round trip. It is idempotent where it
matters: the graph write is keyed by (run_id, step) and events by key, so a retry records
nothing twice. The device action itself cannot be undone; a retried step may act twice, as a
person tapping twice would, and the graph simply records where that led.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
from temporalio import activity

from waystation.kinds.mobile import repository as graph
from waystation.kinds.mobile.activities.driver import DeviceDriver, DriverError, Observation
from waystation.kinds.mobile.activities.identity import (
    ActionInfo,
    ScreenIdentity,
    identify,
    perceptual_hash,
)
from waystation.kinds.mobile.activities.models import (
    ActionCommand,
    ActionView,
    ExploreStepInput,
    ExploreStepResult,
    ForkGraph,
    ForkGraphInput,
)
from waystation.kinds.mobile.activities.sensitivity import is_sensitive
from waystation.kinds.mobile.activities.uixml import HierarchyError, parse_hierarchy
from waystation.sdk import EventWrite
from waystation.sdk.artifacts import ArtifactStore
from waystation.sdk.writes import ReadModelWrite, apply_write, merge_writes, retry_while_unavailable

# A splash or loading screen gets this many more looks before it counts as a screen.
TRANSITIONAL_RETRIES = 3
MAX_SESSIONS = 64
# How long a step's writes wait for the database to come back (a restart, a failover); the
# workflow gives a step longer than this (waystation.kinds.mobile.workflow LOCAL_STEP_TIMEOUT).
OUTAGE_PATIENCE_SECONDS = 75.0
T = TypeVar("T")


class MobileActivities:
    def __init__(self, pool: asyncpg.Pool | None, store: ArtifactStore | None, *,
                 settle_seconds: float = 0.0) -> None:
        self._pool = pool
        self._store = store
        self._settle = settle_seconds
        self._devices: OrderedDict[str, DeviceDriver] = OrderedDict()
        self._memory = _MemoryGraph()

    def device(self, arg: ExploreStepInput) -> DeviceDriver:
        """The run's device; the simulator lives in this process, like a device on its USB."""
        driver = self._devices.get(arg.session_id)
        if driver is None:
            driver = _new_driver(arg)
            self._devices[arg.session_id] = driver
            while len(self._devices) > MAX_SESSIONS:
                self._devices.popitem(last=False)
        self._devices.move_to_end(arg.session_id)
        return driver

    @activity.defn(name="mobile_explore_step")
    async def explore_step(self, arg: ExploreStepInput) -> ExploreStepResult:
        events: list[EventWrite] = []
        device = self.device(arg)
        try:
            started = time.perf_counter()
            await _act(device, arg)
            _heartbeat()
            events.append(_event(arg, "act", started, {"action": arg.command.kind,
                                                       "action_id": arg.command.action_id,
                                                       "label": arg.command.label}))
            started = time.perf_counter()
            obs, hierarchy, ident = await self._observe(device)
            events.append(_event(arg, "observe", started, {"activity": obs.activity,
                                                           "package": obs.package}))
        except (DriverError, HierarchyError) as error:
            events.append(EventWrite(event_key=f"s{arg.step}.error", type="agent.node.failed",
                                     task="act", status="failed", error_message=str(error)))
            await self._write_events(arg, events)
            return ExploreStepResult(step=arg.step, error=str(error))
        started = time.perf_counter()
        in_app = obs.package == arg.app_package
        write = self._graph_write(arg, obs, ident, in_app)
        events.append(_event(arg, "identify", started, {
            "layout_hash": ident.layout_hash, "transitional": ident.near_blank}))
        if arg.persist and self._pool is not None:
            # The perceptual hash is for the stored screen only: computed at most once, and
            # only for a screen stored without one (graph.record_step_in_one_call).
            screen_phash = functools.cache(functools.partial(_screen_phash, obs, hierarchy))
            result = await self._persist(arg, write, events, screen_phash)
        else:
            result = self._memory.record(write)
        actions = [_view(a, result.action_ids[f"{a.kind}:{a.selector}"], arg.app_package)
                   for a in ident.actions] if in_app and result.screen_id is not None else []
        return ExploreStepResult(
            step=arg.step, screen_id=result.screen_id, activity=obs.activity,
            package=obs.package, in_app=in_app, new_screen=result.new_screen,
            new_edge=result.new_edge, transitional=ident.near_blank, actions=actions)

    @activity.defn(name="mobile_restore_fork")
    async def restore_fork(self, arg: ForkGraphInput) -> ForkGraph:
        """A fork's start: its source's steps up to the fork's become its own (a retry copies
        nothing twice), and the graph they make comes back for its policy to carry on from."""
        pool = self._pool
        assert pool is not None, "the fork hook refuses runs that persist nothing"

        async def restore() -> ForkGraph:
            async with pool.acquire() as conn:
                steps, actions = await graph.copy_fork_steps(conn, arg.run_id,
                                                             arg.source_run_id, arg.up_to_step)
            return ForkGraph(steps=steps, actions=actions)
        return await _waiting_out_outages(restore)

    async def _observe(self, device: DeviceDriver) -> tuple[Observation, Any, ScreenIdentity]:
        for attempt in range(TRANSITIONAL_RETRIES + 1):
            obs = await device.observe()
            hierarchy = parse_hierarchy(obs.xml)
            ident = identify(hierarchy)
            if not ident.near_blank or attempt == TRANSITIONAL_RETRIES:
                return obs, hierarchy, ident
            _heartbeat()
            await asyncio.sleep(self._settle * (attempt + 1))
        raise AssertionError("unreachable")

    def _graph_write(self, arg: ExploreStepInput, obs: Observation, ident: ScreenIdentity,
                     in_app: bool) -> graph.StepGraphWrite:
        """The step's graph write, its screen's perceptual hash left out (`_hashed`)."""
        artifacts: list[graph.ArtifactWrite] = []
        shot_sha = xml_sha = None
        if self._store is not None and arg.persist:
            xml_bytes = obs.xml.encode()
            xml_sha = self._store.put(xml_bytes)
            artifacts.append(graph.ArtifactWrite(kind="hierarchy", sha256=xml_sha,
                                                 content_type="application/xml",
                                                 size_bytes=len(xml_bytes)))
            if obs.png:
                shot_sha = self._store.put(obs.png)
                artifacts.append(graph.ArtifactWrite(kind="screenshot", sha256=shot_sha,
                                                     content_type="image/png",
                                                     size_bytes=len(obs.png)))
        screen = None
        if in_app:
            screen = graph.ScreenWrite(
                activity=obs.activity, layout_hash=ident.layout_hash,
                content_hash=ident.content_hash, screenshot_sha=shot_sha,
                hierarchy_sha=xml_sha, label=_title(ident, obs))
        cmd = arg.command
        return graph.StepGraphWrite(
            run_id=arg.run_id, step=arg.step, app_package=arg.app_package, screen=screen,
            actions=[graph.ActionWrite(selector=a.selector, kind=a.kind, label=a.label,
                                       row_group=a.row_group, row_index=a.row_index,
                                       sensitive=is_sensitive(a.label, a.selector))
                     for a in ident.actions] if in_app else [],
            from_screen_id=cmd.from_screen_id, action_id=cmd.action_id,
            foreign_package=None if in_app else obs.package,
            transitional=ident.near_blank, artifacts=artifacts)

    async def _persist(self, arg: ExploreStepInput, write: graph.StepGraphWrite,
                       events: list[EventWrite],
                       screen_phash: Callable[[], int | None]) -> graph.StepGraphResult:
        assert self._pool is not None
        pool = self._pool
        read_model = self._with_prelude(arg, events)
        done = EventWrite(event_key=f"s{arg.step}.persist", type="agent.node.completed",
                          task="persist", status="completed", output={"step": arg.step})

        async def persist() -> graph.StepGraphResult:
            _heartbeat()
            declared = (await self.device(arg).declared_activities(arg.app_package)
                        if arg.command.kind == "launch" else None)
            async with pool.acquire() as conn:
                if not read_model.has_gate_parts:
                    # The usual step: one round trip (migration 085).
                    result = await graph.record_step_in_one_call(conn, graph.OneCallStep(
                        **dict(write), declared_activities=declared, write=read_model,
                        done_event=done), screen_phash)
                    if result is not None:
                        return result
                # A retried step (recorded before), or a write with a gate part.
                async with conn.transaction():
                    if declared is not None:
                        await graph.upsert_app(conn, arg.app_package, declared)
                    result = await graph.record_step(conn, _hashed(write, screen_phash))
                    outcome = done.model_copy(update={"output": {
                        "step": arg.step, "screen_id": result.screen_id,
                        "new_screen": result.new_screen, "new_edge": result.new_edge}})
                    await apply_write(conn, merge_writes(read_model, ReadModelWrite(
                        run_id=arg.run_id, events=[outcome])))
                return result

        return await _waiting_out_outages(persist)

    async def _write_events(self, arg: ExploreStepInput, events: list[EventWrite]) -> None:
        if arg.persist and self._pool is not None:
            pool = self._pool

            async def write() -> None:
                _heartbeat()
                async with pool.acquire() as conn:
                    await apply_write(conn, self._with_prelude(arg, events))

            await _waiting_out_outages(write)

    def _with_prelude(self, arg: ExploreStepInput, events: list[EventWrite]) -> ReadModelWrite:
        own = ReadModelWrite(run_id=arg.run_id, events=events)
        return merge_writes(arg.prelude, own) if arg.prelude else own


async def _waiting_out_outages(call: Callable[[], Awaitable[T]]) -> T:
    """The step's writes wait a database outage out rather than fail the step: a retried
    step would act on the device again (a second tap) before it could record the first."""
    return await retry_while_unavailable(call, give_up_after=OUTAGE_PATIENCE_SECONDS)


def _heartbeat() -> None:
    # A device step is a regular activity with a heartbeat timeout; local ones cannot beat.
    if activity.in_activity() and not activity.info().is_local:
        activity.heartbeat()


def _new_driver(arg: ExploreStepInput) -> DeviceDriver:
    if arg.driver == "adb":
        from waystation.kinds.mobile.activities.adb import AdbDriver

        return AdbDriver(serial=arg.device_serial)
    from waystation.kinds.mobile.activities.simulator.driver import SimulatorDriver

    return SimulatorDriver(arg.app_package)


async def _act(device: DeviceDriver, arg: ExploreStepInput) -> None:
    cmd: ActionCommand = arg.command
    if cmd.kind == "launch":
        await device.launch(arg.app_package)
    elif cmd.kind == "tap":
        await device.tap(cmd.x, cmd.y)
    elif cmd.kind == "long_tap":
        await device.long_tap(cmd.x, cmd.y)
    elif cmd.kind == "input":
        await device.input_text(cmd.x, cmd.y, cmd.text or arg.input_text)
    elif cmd.kind == "scroll":
        await device.swipe(cmd.x, cmd.y2 or cmd.y, cmd.x, cmd.y)
    elif cmd.kind == "back":
        await device.back()


def _event(arg: ExploreStepInput, node: str, started: float, output: dict) -> EventWrite:
    return EventWrite(event_key=f"s{arg.step}.{node}", type="agent.node.completed", task=node,
                      status="completed", output={"step": arg.step, **output},
                      duration_ms=int((time.perf_counter() - started) * 1000))


def _screen_phash(obs: Observation, hierarchy: Any) -> int | None:
    return perceptual_hash(obs.png, hierarchy) if obs.png else None


def _hashed(write: graph.StepGraphWrite,
            screen_phash: Callable[[], int | None]) -> graph.StepGraphWrite:
    if write.screen is None:
        return write
    return write.model_copy(update={
        "screen": write.screen.model_copy(update={"phash": screen_phash()})})


def _view(a: ActionInfo, action_id: int, package: str) -> ActionView:
    x1, y1, x2, y2 = a.bounds
    # A scroll swipes from near the bottom of the container to near its top.
    lower = y1 + (y2 - y1) * 3 // 4
    return ActionView(id=action_id, selector=a.selector, kind=a.kind, label=a.label, x=a.x,
                      y=a.y if a.kind != "scroll" else y1 + (y2 - y1) // 4, y2=lower,
                      row_group=a.row_group, row_index=a.row_index,
                      sensitive=is_sensitive(a.label, a.selector))


def _title(ident: ScreenIdentity, obs: Observation) -> str:
    return obs.activity.rsplit(".", 1)[-1]


class _MemoryGraph:
    """The same ids and novelty answers without Postgres (the benchmark's baseline)."""

    def __init__(self) -> None:
        self.screens: dict[tuple[str, str, str], int] = {}
        self.actions: dict[tuple[int, str], int] = {}
        self.edges: set[tuple[int, int, int]] = set()

    def record(self, w: graph.StepGraphWrite) -> graph.StepGraphResult:
        if w.screen is None:
            return graph.StepGraphResult(screen_id=None, new_screen=False, new_edge=False)
        key = (w.app_package, w.screen.activity, w.screen.layout_hash)
        new_screen = key not in self.screens
        screen_id = self.screens.setdefault(key, len(self.screens) + 1)
        ids = {}
        for a in w.actions:
            ids[a.key] = self.actions.setdefault((screen_id, a.key), len(self.actions) + 1)
        new_edge = False
        if w.from_screen_id is not None and w.action_id is not None:
            edge = (w.from_screen_id, w.action_id, screen_id)
            new_edge = edge not in self.edges
            self.edges.add(edge)
        return graph.StepGraphResult(screen_id=screen_id, new_screen=new_screen,
                                     new_edge=new_edge, action_ids=ids)
