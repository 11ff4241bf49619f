"""The API and the worker keep collections off their start-up heap while they serve."""

from __future__ import annotations

import gc

from waystation.heap import startup_heap_frozen


def test_the_startup_heap_is_frozen_while_serving_and_let_go_after() -> None:
    with startup_heap_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
