"""Templates rendered in processes that can be stopped (issue 25, item 2).

The budget inside a render (templates.py) counts loop turns and checks the clock between
chunks, but one expression can be a single C call that no check interrupts:
`"x"|center(1000000000)`, `"%01000000000d" % 1`, a list nested on itself thirty times then
printed, `((2 ** 4096) ** 4096) ** 4096`. In the worker's thread such a call took gigabytes or
minutes, and a thread cannot be stopped. So every render and branch condition runs in a
render process: its address space is capped (`MEMORY_BYTES` beyond what it holds at start, so
an allocation past it is a MemoryError inside the render), and the worker kills it when it has
not answered `KILL_AFTER_SECONDS` after being asked. Either way the item fails with a
`template over budget: ...` error and a fresh process takes the next render; the worker, its
event loop and other jobs' items are untouched.

A render process is started once and serves renders one at a time; each of the
`MAX_PROCESSES` threads of `_THREADS` owns at most one, so renders run side by side up to that
many while the event loop waits for them without blocking. A process ends with its worker
(daemon, and it returns when its pipe closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from waystation.kinds.batch.activities.templates import (
    RENDER_SECONDS,
    OverBudget,
    TemplateProblem,
    evaluate,
    render,
)

MEMORY_BYTES = 512 * 1024 * 1024
# The render's own clock stops it at RENDER_SECONDS; past this, it is in a call that no check
# reaches.
KILL_AFTER_SECONDS = RENDER_SECONDS + 1.0
MAX_PROCESSES = max(2, min(8, os.cpu_count() or 2))
PROBLEM_CHARS = 500
_OPERATIONS: dict[str, Callable[..., Any]] = {"render": render, "evaluate": evaluate}
# Spawned, not forked: the worker has threads (Temporal's, this module's), and a fork copies
# only the one that forks, with whatever locks the others held.
_CONTEXT = multiprocessing.get_context("spawn")


async def render_bounded(source: str, item: Mapping[str, Any],
                         outputs: Mapping[str, Any]) -> str:
    """`templates.render` in a render process; TemplateProblem (OverBudget) as there, also
    for memory and for a render its process had to be stopped in."""
    answer = await _ask("render", (source, dict(item), dict(outputs)))
    assert isinstance(answer, str)
    return answer


async def evaluate_bounded(condition: str, item: Mapping[str, Any],
                           outputs: Mapping[str, Any], output: Any) -> bool:
    """`templates.evaluate` in a render process, bounded as `render_bounded`."""
    return bool(await _ask("evaluate", (condition, dict(item), dict(outputs), output)))


_THREADS = ThreadPoolExecutor(max_workers=MAX_PROCESSES, thread_name_prefix="render")
_local = threading.local()


async def _ask(operation: str, arguments: tuple[Any, ...]) -> Any:
    return await asyncio.get_running_loop().run_in_executor(
        _THREADS, _exchange, operation, arguments)


class _Process:
    def __init__(self) -> None:
        self.conn, child_end = _CONTEXT.Pipe()
        self.process = _CONTEXT.Process(target=serve, args=(child_end, MEMORY_BYTES),
                                        name="waystation-render", daemon=True)
        self.process.start()
        child_end.close()

    def stop(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


def _exchange(operation: str, arguments: tuple[Any, ...]) -> Any:
    """In one of `_THREADS`: ask this thread's render process, waiting at most
    KILL_AFTER_SECONDS for its answer."""
    own: _Process | None = getattr(_local, "process", None)
    if own is None or not own.process.is_alive():
        own = _local.process = _Process()
    try:
        own.conn.send((operation, arguments))
        if not own.conn.poll(KILL_AFTER_SECONDS):
            raise OverBudget(f"template over budget: rendering took over {RENDER_SECONDS} s")
        outcome, value = own.conn.recv()
    except (EOFError, OSError):
        outcome, value = "ended", ("template failed: its render process ended (out of "
                                   "memory or killed)")
    except OverBudget:
        _retire(own)
        raise
    if outcome == "ok":
        return value
    if outcome != "problem":  # the process has ended, or is ending: the next render starts one
        _retire(own)
    raise (OverBudget if value.startswith("template over budget") else TemplateProblem)(value)


def _retire(process: _Process) -> None:
    process.stop()
    _local.process = None


def serve(conn: Connection, memory_bytes: int) -> None:
    """A render process: answer renders until the worker closes the pipe."""
    _cap_memory(memory_bytes)
    while True:
        try:
            operation, arguments = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Any] = ("ok", _OPERATIONS[operation](*arguments))
        except TemplateProblem as problem:
            answer = ("problem", str(problem)[:PROBLEM_CHARS])
        except MemoryError:
            # Its heap may be in pieces: answer, then make way for a fresh process.
            conn.send(("ended", f"template over budget: more than "
                                f"{memory_bytes // (1024 * 1024)} MiB of memory"))
            return
        except Exception as error:  # noqa: BLE001 - any failure of a user's template is its item's
            answer = ("problem", f"template failed: {type(error).__name__}: "
                                 f"{error}"[:PROBLEM_CHARS])
        conn.send(answer)


def _cap_memory(memory_bytes: int) -> None:
    """Cap the address space at what the process holds now plus `memory_bytes` (Linux; where
    the limit is not available the kill after KILL_AFTER_SECONDS still bounds a render)."""
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        with open("/proc/self/statm") as statm:
            held = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = held + memory_bytes
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
