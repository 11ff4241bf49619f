"""The SSE client tests and benchmarks use (what a browser's EventSource does)."""

from waystation.testing import SseEvent, sse_events

__all__ = ["SseEvent", "sse_events"]
