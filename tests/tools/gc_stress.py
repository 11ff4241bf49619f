"""A pytest plug-in that collects garbage every few allocations, on whichever thread
allocates: `PYTHONPATH=tests/tools pytest -p gc_stress tests/integration/test_agent_api.py`.

It is how the crash docs/tests.md describes ("Garbage collection") was reproduced and shown
gone: a suspended async generator finalized by a workflow worker thread's collection."""

import gc

gc.set_threshold(20, 2, 2)
