"""A worker's status in GET /workers, from its last poll and the items running on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from waystation.kinds.batch.workers_service import GONE_AFTER, worker_status

NOW = datetime(2026, 11, 26, 15, 0, tzinfo=UTC)


def test_a_polling_worker_is_active_with_items_running_else_idle():
    assert worker_status(NOW - timedelta(seconds=5), 2, NOW) == "active"
    assert worker_status(NOW - GONE_AFTER, 0, NOW) == "idle"


def test_a_worker_not_heard_from_is_gone_even_with_items_marked_running():
    # Its items wait there until a retry runs them elsewhere.
    assert worker_status(NOW - GONE_AFTER - timedelta(seconds=1), 3, NOW) == "gone"
    assert worker_status(None, 1, NOW) == "gone"
