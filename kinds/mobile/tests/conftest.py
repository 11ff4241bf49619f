"""The mobile kind's tests run on the repository's test kit: the `tests` package, whose
fixtures start a real PostgreSQL and real Temporal servers (tests/conftest.py), on the path by
`pythonpath` (the root's pyproject.toml, and this distribution's for `pytest kinds/mobile/tests`).
So these tests run with the whole suite, alone, and against installed wheels of both
distributions (tests/integration/test_mobile_distribution.py). This folder is on the path too
(a folder without `__init__.py`): its helpers are `mobile_helpers` and `mobile_offline`.

A conftest's fixtures serve the tests under its folder only, so the ones these tests take are
named here; run with the whole suite, the session's servers are then started once more for
them."""

from __future__ import annotations

from tests.conftest import (  # noqa: F401 - the fixtures these tests take, and tier marking
    database_url,
    dev_env,
    migrated_url,
    pool,
    pytest_collection_modifyitems,
    task_queue,
    time_env,
    worker,
)
from tests.inprocess_api import api, settings  # noqa: F401 - an API with a worker
