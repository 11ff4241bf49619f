"""Schemathesis against the live API's OpenAPI schema, with two users' tokens.

The API and a worker run as child processes (`waystation api`, `waystation worker`) against
the dev server and real Postgres. Schemathesis generates, for every operation but the SSE
streams (they stream until the run ends; tests/integration/test_streams.py covers them),
positive and negative examples, then stateful scenarios that follow links (a run just created
feeds the run-scoped operations). Every request is made as alice and replayed as bob; examples on
run-, job- and item-scoped operations are also aimed at alice's real resources (a run waiting
at a gate, a batch job and its item, a finished mobile exploration). Checks, besides all of
Schemathesis' own (no 5xx; status codes, content types, headers and bodies as the schema
says; schema-valid input accepted, invalid input refused; a created run is there):

- a request naming another user's run, job or item is a 404 (or a 422 when it is invalid
  anyway), never a 2xx, so nothing of it is exposed or changed;
- no 2xx body shows another user's run, job or item id;
- afterwards, no decision on a fuzzed run was recorded as made by anyone but its owner.

WAYSTATION_FUZZ_EXAMPLES raises the examples per operation for a longer local hunt, and
WAYSTATION_FUZZ_RANDOM=1 draws new examples each run (by default they are fixed, for CI).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from temporalio.service import RPCError

from tests.helpers import IDEA
from waystation.api.auth import issue_token
from waystation.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
SECRET = "fuzz-secret-0123456789-0123456789-abcdef"
# Examples per operation, and scenarios (and steps) of the state machine: bounded so the file
# runs well within 90 s on a 2-core machine.
EXAMPLES_PER_OPERATION = int(os.environ.get("WAYSTATION_FUZZ_EXAMPLES", 12))
# Fixed examples by default, so CI is repeatable; WAYSTATION_FUZZ_RANDOM=1 explores anew.
DERANDOMIZE = os.environ.get("WAYSTATION_FUZZ_RANDOM") != "1"
# Enough scenarios that the derandomized walk follows more than 20 links into the run-scoped
# operations (larger input schemas and the snapshot-history routes each shifted the examples).
SCENARIOS = 35
STEPS_PER_SCENARIO = 6
SAMPLE_APP = "com.waystation.sample.notes"
ID_KEYS = {"run_id", "job_id", "item_id"}
SCOPED_PATH = re.compile(r"\{(run_id|job_id|item_id)\}")
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                     r"[0-9a-fA-F]{12}")


class Stack:
    """The API (`waystation api`) and a worker (`waystation worker`) as child processes.

    Out of process on purpose: Hypothesis then runs alone in this process (the worker's
    workflow threads parsing code at the same time trip CPython 3.11's AST recursion check).
    """

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._env = {**env, "WAYSTATION_API_PORT": str(self.port)}
        self._logs = logs
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        for role in ("api", "worker"):
            with open(self._logs / f"{role}.log", "wb") as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "waystation", role], cwd=ROOT, env=self._env,
                    stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while True:
            assert all(p.poll() is None for p in self.procs), self.logs()
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            assert time.monotonic() < deadline, self.logs()
            # Synchronous: schemathesis drives the API from a thread with `requests`; `eventually`
            # is a coroutine.
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:]
                         for p in sorted(self._logs.glob("*.log")))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def stack(dev_env, migrated_url: str, task_queue: str, tmp_path: Path) -> Iterator[Stack]:
    stack = Stack({**os.environ,
                   "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                   "TEMPORAL_NAMESPACE": dev_env.client.namespace,
                   "TEMPORAL_TASK_QUEUE": task_queue,
                   "DATABASE_URL": migrated_url,
                   "WAYSTATION_JWT_SECRET": SECRET,
                   "WAYSTATION_AGENT_BACKEND": "offline",
                   "WAYSTATION_OTEL_EXPORTER": "none",
                   "WAYSTATION_DATA_DIR": str(tmp_path / "data")}, tmp_path)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


class CrossUserLeak(AssertionError):
    """A request of one user exposed or changed another user's run, job or item."""


@dataclass
class Owners:
    """Who owns which run / job / item id, learnt from the users' own 2xx answers."""

    users: tuple[str, str]
    of: dict[str, str] = field(default_factory=dict)
    requests: int = 0
    cross_checks: int = 0
    cross_checked: set[str] = field(default_factory=set)
    scoped_operations: set[str] = field(default_factory=set)
    linked_steps: int = 0
    steps: int = 0

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}

    def other(self, user: str) -> str:
        return self.users[1] if user == self.users[0] else self.users[0]

    def learn(self, user: str, case: schemathesis.Case, response: schemathesis.Response) -> None:
        if not 200 <= response.status_code < 300:
            return
        if case.method == "POST" and case.path == "/runs":
            self.of.setdefault(response.json()["run_id"], user)
        for key, value in _id_fields(_json(response)):
            if key in ID_KEYS:
                self.of.setdefault(value, user)

    def check(self, user: str, case: schemathesis.Case,
              response: schemathesis.Response) -> None:
        """Raise when `user` reached someone else's run, job or item."""
        label = f"{case.method} {case.path}"
        foreign = [v for v in (case.path_parameters or {}).values()
                   if self.of.get(str(v), user) != user]
        if foreign:
            self.cross_checks += 1
            self.cross_checked.add(label)
            body = _json(response)
            code = body.get("error", {}).get("code") if isinstance(body, dict) else None
            ok = (response.status_code == 404 and str(code).endswith("_not_found")) \
                or response.status_code == 422
            if not ok:
                raise CrossUserLeak(label + ": " + (
                    f"{user} got {response.status_code} {code} for {foreign[0]} owned by "
                    f"{self.of[str(foreign[0])]}"))
        if 200 <= response.status_code < 300:
            for key, value in _id_fields(_json(response)):
                if key in ID_KEYS and self.of.get(value, user) != user:
                    raise CrossUserLeak(label + ": " + (
                        f"{user}'s {response.status_code} shows {key} {value} owned by "
                        f"{self.of[value]}"))


def _json(response: schemathesis.Response) -> Any:
    if "json" not in (response.headers.get("content-type") or [""])[0]:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _id_fields(body: Any):  # type: ignore[no-untyped-def]
    if isinstance(body, dict):
        for key, value in body.items():
            if isinstance(value, str) and UUID_RE.fullmatch(value):
                yield key, value.lower()
            else:
                yield from _id_fields(value)
    elif isinstance(body, list):
        for item in body:
            yield from _id_fields(item)


def _load_schema(url: str) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict({
        # The bearer token is the test's to give (as alice, then as bob), never generated: a
        # "negative" case without it would be sent with it all the same.
        "generation": {"mode": "all", "with-security-parameters": False},
        # What a schema cannot say: a batch template that does not parse, an option the
        # decision's checkpoint does not offer. Those answers are a precise 422 (or 409 for a
        # checkpoint that is not pending); every other operation takes any schema-valid input.
        "operations": [{
            "include-method": "POST",
            "include-path": ["/runs", "/runs/{run_id}/decisions/{checkpoint_name}"],
            "checks": {"positive_data_acceptance": {
                "expected-statuses": ["2xx", "401", "403", "404", "409", "422", "503"]}},
        }, {
            # People: a schema-valid request may name a group the caller is not in (404), need
            # a group role it lacks (403), leave a group without an owner (409), or carry a
            # decision link this installation never signed (403).
            "include-path-regex": "^/(groups|webhooks|api-keys|decide-link|me/contact)",
            "checks": {"positive_data_acceptance": {
                "expected-statuses": ["2xx", "401", "403", "404", "409", "422", "503"]}},
        }, {
            # Policies and analytics: a CEL condition that does not parse, a decision body
            # that both decides and routes (or answers without deciding), `since` beside
            # `window` are a precise 422 a schema cannot say; a group the caller is not in is
            # 404, a role it lacks 403.
            "include-path-regex": "^/(policies|analytics)",
            "checks": {"positive_data_acceptance": {
                "expected-statuses": ["2xx", "401", "403", "404", "409", "422", "503"]}},
        }, {
            # Things a run has only later, or only for some kinds: a 404 right after the run
            # was created is correct here ("no snapshot yet", "not a mobile_agent run").
            "include-path-regex": "^/(runs/[^/]+/(snapshots|graph|artifacts)|jobs|items)",
            "checks": {"ensure_resource_availability": {"enabled": False}},
        }],
    })
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", config=config)
    # Streams run until their run ends or waits (an AG-UI run is a stream too).
    return schema.exclude(path_regex=r"(/stream$|^/ag-ui/)")


def _seed(url: str, owners: Owners, session: requests.Session) -> dict[str, list[str]]:
    """Alice's real resources to aim examples at: a run waiting at a gate, a batch job with
    its items and outputs, a short mobile exploration with its graph and artifacts."""
    alice = owners.users[0]
    headers = owners.headers(alice)

    def start(body: dict[str, Any]) -> str:
        response = session.post(f"{url}/runs", json=body, headers=headers, timeout=30)
        assert response.status_code == 201, response.text
        run_id = response.json()["run_id"]
        owners.of[run_id] = alice
        return run_id

    def wait(path: str, ready) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 60
        while True:
            body = session.get(f"{url}{path}", headers=headers, timeout=30).json()
            if ready(body):
                return body
            assert time.monotonic() < deadline, body
            # Synchronous, as above: this runs in schemathesis' thread.
            time.sleep(0.1)

    gated = start({"kind": "validation", "input": {"entrepreneur_input": IDEA,
                                                   "gates": ["approve_founders_brief"]}})
    job = start({"kind": "batch", "input": {"name": "fuzz", "items": [{"text": "a"}],
                                            "steps": [{"name": "summarize",
                                                       "template": "Sum up {{ item.text }}"}]}})
    mobile = start({"kind": "mobile_agent", "input": {"app_package": SAMPLE_APP,
                                                      "max_steps": 3}})
    wait(f"/runs/{gated}", lambda run: run["pending_checkpoint"] == "approve_founders_brief")
    items = wait(f"/jobs/{job}/items", lambda page: page.get("items"))["items"]
    wait(f"/runs/{mobile}", lambda run: run["status"] == "completed")
    item = items[0]["item_id"]
    owners.of[item] = alice
    return {"run_id": [gated, job, mobile], "job_id": [job], "item_id": [item],
            "checkpoint_name": ["approve_founders_brief"], "step": ["summarize"],
            "step_ordinal": [1],
            "package": [SAMPLE_APP]}


def _run_fuzz(url: str, owners: Owners) -> None:
    """Per-operation examples, then stateful scenarios; raises on the first failure."""
    schema = _load_schema(url)
    alice, bob = owners.users
    session = requests.Session()
    seeded = _seed(url, owners, session)
    aimed = itertools.count()

    def call_as(user: str, case: schemathesis.Case) -> None:
        response = case.call(session=session, headers=owners.headers(user), timeout=30)
        seen(user, case, response)
        case.validate_response(response, headers=owners.headers(user))

    def seen(user: str, case: schemathesis.Case, response: schemathesis.Response) -> None:
        owners.requests += 1
        owners.check(user, case, response)
        owners.learn(user, case, response)

    for result in schema.get_all_operations():
        operation = result.ok()
        if SCOPED_PATH.search(operation.path):
            owners.scoped_operations.add(f"{operation.method.upper()} {operation.path}")

        @hypothesis.settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None,
                             derandomize=DERANDOMIZE,
                             phases=[Phase.explicit, Phase.generate],
                             suppress_health_check=list(HealthCheck), database=None)
        @hypothesis.given(case=operation.as_strategy())
        def per_operation(case: schemathesis.Case) -> None:
            call_as(alice, case)
            call_as(bob, case)
            # The same example aimed at alice's real resources, as her and as bob.
            params = case.path_parameters or {}
            if params and set(params) <= set(seeded):
                turn = next(aimed)
                real = case.operation.Case(
                    path_parameters={k: seeded[k][turn % len(seeded[k])] for k in params},
                    query=case.query, headers=case.headers, body=case.body,
                    media_type=case.media_type)
                call_as(alice, real)
                call_as(bob, real)

        per_operation()

    # POST /jobs/{id}/retry-failed answers a new run id too: with a second producer of run
    # ids the fixed walk followed no link at all (linked_steps 0). The route is still fuzzed
    # per operation above; the walk keeps to one producer.
    walk = schema.exclude(path_regex=r"/retry-failed$")

    class Machine(walk.as_state_machine()):  # type: ignore[misc]
        """Alice's scenarios (links fill in her run ids); each step replayed as bob."""

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"headers": owners.headers(alice), "session": session, "timeout": 30}

        def after_call(self, response: schemathesis.Response,
                       case: schemathesis.Case) -> None:
            super().after_call(response, case)
            seen(alice, case, response)

        def step(self, input):  # type: ignore[no-untyped-def]
            owners.steps += 1
            owners.linked_steps += input.transition is not None and input.is_applied
            output = super().step(input)
            call_as(bob, input.case)
            return output

    Machine.run(settings=hypothesis.settings(
        max_examples=SCENARIOS, stateful_step_count=STEPS_PER_SCENARIO, deadline=None,
        derandomize=DERANDOMIZE,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck), database=None))


# About 35 s: in the slow tier, which CI runs after the README's test command.
@pytest.mark.slow
async def test_schemathesis_two_users(stack, pool, dev_env):
    tag = uuid.uuid4().hex[:6]
    owners = Owners(users=(f"alice-{tag}", f"bob-{tag}"))
    try:
        # Blocking on purpose: nothing on this event loop has to run meanwhile.
        _run_fuzz(stack.url, owners)
    finally:
        await _terminate_runs(pool, dev_env.client, owners.users)
    # Every operation on a run, job or item was tried with another user's real one, and the
    # state machine followed links (alice's new runs into the run-scoped operations).
    assert owners.cross_checked == owners.scoped_operations, owners
    assert owners.requests > 500 and owners.linked_steps > 20, owners
    async with pool.acquire() as conn:
        foreign = await conn.fetch(
            """SELECT h.id, r.owner, h.decision_by FROM hitl_requests h
                 JOIN runs r ON r.id = h.run_id
                WHERE r.owner = ANY($1::text[]) AND h.decision_by IS NOT NULL
                  AND h.decision_by NOT IN (r.owner, 'system')""", list(owners.users))
        assert foreign == []


async def _terminate_runs(pool, client, users) -> None:  # type: ignore[no-untyped-def]
    """The fuzzed runs (long mobile explorations among them) stop with the test."""
    async with pool.acquire() as conn:
        ids = await conn.fetch("SELECT workflow_id FROM runs WHERE owner = ANY($1::text[])",
                               list(users))

    async def terminate(workflow_id: str) -> None:
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(workflow_id).terminate("fuzz test over")
    await asyncio.gather(*(terminate(r["workflow_id"]) for r in ids))
