"""The worker's Prometheus endpoint: Temporal's SDK metrics (task slots, latencies, polls,
activity and workflow outcomes) plus Waystation's model counters, served by the Temporal
runtime itself on WAYSTATION_WORKER_METRICS_PORT (off when unset)."""

from __future__ import annotations

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from waystation.settings import Settings


def metrics_runtime(settings: Settings) -> Runtime | None:
    """A runtime serving `/metrics` when a port is set; None means the default runtime.

    Durations in seconds and counters with `_total`, as Prometheus names them elsewhere. A
    runtime owns threads: create one per process.
    """
    if settings.worker_metrics_port is None:
        return None
    address = f"{settings.worker_metrics_host}:{settings.worker_metrics_port}"
    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(
        bind_address=address, counters_total_suffix=True, durations_as_seconds=True)))
