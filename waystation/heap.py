"""Full garbage collections that do not walk what a process loaded to start.

A started API or worker holds about half a million objects from its imports and start-up
(FastAPI's, pydantic's, Temporal's, the kinds' models and schemas). CPython's full collection
walks them all, about 0.3 s on one of this machine's cores with the GIL held, so every
request and stream of the API, or every workflow task of the worker, stalls that long whenever
one comes due; a thread that allocates many objects (a batch job's templates checked at
submit) brings one on every second or so. Those objects live as long as the server: frozen
once it has started (`gc.freeze`, as CPython's documentation suggests for servers), no
collection walks them, and a full one takes milliseconds.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def startup_heap_frozen() -> Iterator[None]:
    """While serving: what start-up left kept out of every collection. Unfrozen when serving
    ends, so a process that serves again (a test's next app) can collect it. No collection
    first: it would walk the whole heap each time (0.3 s an app in the test suite); what little
    garbage start-up left is kept until then."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
