"""Prometheus metrics of the API process, for `GET /metrics`.

Counted in the process: HTTP requests by route template (never the raw path, so ids do not
multiply series) and the time until the response started (a stream's first byte, not its
end). Read when scraped: open streams and overflows from the event hub, and the read model's
figures (runs, events appended, pending gates and the age of the oldest, decision latency,
and each kind's own: `DataHooks.metrics`) from Postgres. Those last are the same for every API
replica: aggregate them with `max`, not `sum`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from waystation.api.event_hub import EventHub
from waystation.persistence.analytics import BUCKETS, bucket_bounds
from waystation.persistence.metrics import ReadModelFigures

# Upper bounds of the decision-latency buckets: a minute to a week, humans' pace.
DECISION_LATENCY_BOUNDS = (60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 86400.0, 3 * 86400.0,
                           7 * 86400.0)
_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
UNMATCHED_ROUTE = "unmatched"
__all__ = ["CONTENT_TYPE_LATEST", "ApiMetrics", "HttpMetrics", "DECISION_LATENCY_BOUNDS"]


class ApiMetrics:
    """The process's registry: counted metrics plus what is read at scrape time."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)
        self.requests = Counter(
            "waystation_http_requests", "HTTP requests answered, by route template and status",
            ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram(
            "waystation_http_request_duration_seconds",
            "Time from a request's arrival to its response starting (a stream's first byte)",
            ["method", "route"], registry=self.registry)
        self._scraped = _ScrapedFigures()
        self.registry.register(self._scraped)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def render(self, figures: ReadModelFigures | None, hub: EventHub) -> bytes:
        """The exposition text; `figures` None means the read model could not be read."""
        self._scraped.figures, self._scraped.hub = figures, hub
        try:
            return generate_latest(self.registry)
        finally:
            self._scraped.figures = self._scraped.hub = None


class _ScrapedFigures:
    """A collector of values that exist elsewhere (the hub, Postgres), set just before a
    scrape renders and cleared after, so nothing stale is ever reported."""

    def __init__(self) -> None:
        self.figures: ReadModelFigures | None = None
        self.hub: EventHub | None = None

    def describe(self) -> list[Metric]:
        return []  # values appear only while rendering; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        if self.hub is not None:
            yield from _hub_metrics(self.hub)
        up = GaugeMetricFamily("waystation_read_model_up",
                               "1 when this scrape could read the read model (Postgres)")
        up.add_metric([], 0 if self.figures is None else 1)
        yield up
        if self.figures is not None:
            yield from _read_model_metrics(self.figures)


def _hub_metrics(hub: EventHub) -> Iterator[Metric]:
    streams = GaugeMetricFamily("waystation_sse_open_streams", "Open SSE streams, by stream",
                                labels=["stream"])
    for stream, count in hub.open_streams().items():
        streams.add_metric([stream], count)
    yield streams
    yield CounterMetricFamily("waystation_sse_overflows",
                              "Streams ended because their client fell too far behind",
                              value=hub.overflows)


def _read_model_metrics(figures: ReadModelFigures) -> Iterator[Metric]:
    runs = GaugeMetricFamily("waystation_runs", "Runs by kind and status",
                             labels=["kind", "status"])
    events: dict[str, int] = {}
    for row in figures.runs:
        runs.add_metric([row.kind, row.status], row.runs)
        events[row.kind] = events.get(row.kind, 0) + row.events
    yield runs
    appended = CounterMetricFamily("waystation_events_appended",
                                   "Run events appended to the read model, by run kind",
                                   labels=["kind"])
    for kind, count in sorted(events.items()):
        appended.add_metric([kind], count)
    yield appended
    pending = GaugeMetricFamily("waystation_gates_pending",
                                "Decision requests waiting for a human, by run kind",
                                labels=["kind"])
    oldest = GaugeMetricFamily("waystation_gates_oldest_pending_age_seconds",
                               "How long the oldest pending decision request has waited",
                               labels=["kind"])
    for gates in figures.pending_gates:
        pending.add_metric([gates.kind], gates.pending)
        oldest.add_metric([gates.kind], gates.oldest_age_seconds)
    yield pending
    yield oldest
    yield _decision_latency(figures)
    yield _time_to_decide(figures)
    yield from figures.kind_metrics


def _decision_latency(figures: ReadModelFigures) -> Metric:
    histogram = HistogramMetricFamily(
        "waystation_decision_latency_seconds",
        "Time from a decision request opening to its decision, by run kind",
        labels=["kind"])
    per_kind: dict[str, list[int]] = {}
    seconds: dict[str, float] = {}
    for row in figures.decision_latency:
        counts = per_kind.setdefault(row.kind, [0] * (len(DECISION_LATENCY_BOUNDS) + 1))
        counts[min(row.bucket, len(DECISION_LATENCY_BOUNDS))] += row.decided
        seconds[row.kind] = seconds.get(row.kind, 0.0) + row.seconds
    for kind, counts in sorted(per_kind.items()):
        cumulative, buckets = 0, []
        for bound, count in zip((*DECISION_LATENCY_BOUNDS, float("inf")), counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        histogram.add_metric([kind], buckets, sum_value=seconds[kind])
    return histogram


def _time_to_decide(figures: ReadModelFigures) -> Metric:
    """The roll-ups' histograms (persistence/analytics.py) at every other bound: 1 s, 2 s,
    4 s ... 2^23 s (97 days), so a gate has 25 series, not 50."""
    histogram = HistogramMetricFamily(
        "waystation_time_to_decide_seconds",
        "Time from a decision request opening to its decision, by run kind and gate",
        labels=["kind", "gate"])
    for gate in sorted(figures.time_to_decide, key=lambda g: (g.kind, g.gate)):
        cumulative, buckets = 0, []
        for bucket in range(1, BUCKETS + 1):
            cumulative += gate.buckets.get(bucket, 0)
            if bucket % 2 == 1 and bucket < BUCKETS:
                buckets.append((repr(bucket_bounds(bucket)[1]), cumulative))
        buckets.append(("+Inf", cumulative))
        histogram.add_metric([gate.kind, gate.gate], buckets, sum_value=gate.seconds)
    return histogram


class HttpMetrics:
    """Counts every HTTP answer, refusals before routing included. Plain ASGI, so streaming
    responses pass through untouched."""

    def __init__(self, app: ASGIApp, *, metrics: ApiMetrics, routes: list) -> None:
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        method = scope["method"] if scope["method"] in _METHODS else "other"
        answered = False

        async def counting_send(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start" and not answered:
                answered = True
                self.metrics.observe(method, self._route(scope), message["status"],
                                     time.perf_counter() - began)
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            if not answered:  # the outermost error handler answers 500 after we are gone
                self.metrics.observe(method, self._route(scope), 500,
                                     time.perf_counter() - began)
            raise

    def _route(self, scope: Scope) -> str:
        """The matched route's template; for requests answered before routing (body
        refusals), the template they would have matched."""
        path = getattr(scope.get("route"), "path", None)
        if path is not None:
            return path
        for candidate in self.routes:
            match, _ = candidate.matches(scope)
            if match == Match.FULL and hasattr(candidate, "path"):
                return candidate.path
        return UNMATCHED_ROUTE
