"""The Temporal worker: every workflow and activity of Waystation on one task queue."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from waystation.activities.agents import AgentBackend, backend_named
from waystation.activities.agents.metered import MeteredBackend, ModelMeter
from waystation.activities.agents.offline import use_offline_answers
from waystation.activities.artifacts import LocalArtifactStore
from waystation.activities.channels import (
    MailChannel,
    NotificationChannel,
    SlackChannel,
    WebhookChannel,
)
from waystation.activities.decision_mail import DecisionMailActivities, MailSettings
from waystation.activities.decision_policies import DecisionPolicyActivities
from waystation.activities.deltas import use_deltas
from waystation.activities.deps import WorkerDeps
from waystation.activities.read_model import ReadModelActivities
from waystation.activities.retention import RetentionActivities
from waystation.activities.slack.channel import SlackActivities
from waystation.activities.slack.web_api import SlackConfig
from waystation.activities.webhooks import WebhookActivities
from waystation.contracts.kinds import WorkerSetup
from waystation.database import login_url
from waystation.heap import startup_heap_frozen
from waystation.persistence import events as events_repo
from waystation.persistence.claims import WORKER_ROLE
from waystation.persistence.db import create_pool
from waystation.registry import Registry, load_registry
from waystation.retention_schedule import ensure_retention_schedule
from waystation.sandboxing import SandboxEveryWorkflow
from waystation.settings import Settings
from waystation.telemetry import configure_tracing
from waystation.temporal_client import connect_temporal
from waystation.worker_metrics import metrics_runtime
from waystation.workflows.decision_mail import DecisionMail
from waystation.workflows.definitions import activity_name
from waystation.workflows.retention import RetentionSweep
from waystation.workflows.slack_notification import SlackNotification
from waystation.workflows.webhook_notification import WebhookNotification

log = logging.getLogger(__name__)


# Workflows of every installation besides the run kinds' (replayed by tests/replay/test_replay.py).
NOTIFICATION_WORKFLOWS = (WebhookNotification, DecisionMail, SlackNotification)


def worker_workflows(registry: Registry) -> list[type]:
    """Every workflow a worker runs: the registered kinds', the notifications' and the
    retention sweep's."""
    return [*registry.workflows(), *NOTIFICATION_WORKFLOWS, RetentionSweep]


def build_worker(
    client: Client, pool: asyncpg.Pool, *, task_queue: str, backend: AgentBackend,
    registry: Registry | None = None, max_cached_workflows: int = 1000,
    sticky_queue_schedule_to_start_timeout: timedelta = timedelta(seconds=10),
    artifact_dir: Path | None = None,
    graceful_shutdown_timeout: timedelta = timedelta(),
    settings: Settings | None = None,
    mail: MailSettings | None = None,
    retention_archive_dir: Path | None = None,
    sandbox_every_workflow: bool | None = None,
    webhook_private_networks: bool | None = None,
    slack: SlackConfig | None = None,
) -> Worker:
    """A worker for every registered kind's workflow and activities (built-ins only when no
    registry is given), and the notifications' (webhooks; email when `mail` is given).

    `sandbox_every_workflow` (default: WAYSTATION_SANDBOX_EVERY_WORKFLOW) runs the built-in
    workflows in Temporal's sandbox too: see waystation/sandboxing.py.
    `webhook_private_networks` (default: WAYSTATION_WEBHOOK_PRIVATE_NETWORKS): see
    activities/webhook_targets.py. `settings` (default: from the environment) is what each
    kind's `WorkerHooks.deps` builds its own dependencies from, and Slack's configuration
    when `slack` is not given (`slack_config`)."""
    # WAYSTATION_SECRETS_KEY, each kind's own settings, and what the arguments leave unset
    settings = settings or Settings()
    if sandbox_every_workflow is None:
        sandbox_every_workflow = settings.sandbox_every_workflow
    if webhook_private_networks is None:
        webhook_private_networks = settings.webhooks_to_private_networks
    registry = registry or load_registry(use_entry_points=False)
    # The offline backend's typed answers to the kinds' own tasks.
    use_offline_answers(registry.offline_answers())
    # Where model requests publish their live deltas (activities/deltas.py).
    use_deltas(pool)
    retention = RetentionActivities(
        pool, client, archive_dir=retention_archive_dir,
        store=LocalArtifactStore(artifact_dir) if artifact_dir else None,
        kinds=registry.retention())
    webhooks = WebhookActivities(pool, settings.secrets_box,
                                 private_networks=webhook_private_networks,
                                 deliveries_per_workflow=settings.webhook_deliveries_per_workflow)
    mailer = DecisionMailActivities(pool, mail) if mail is not None else None
    slack = slack or slack_config(settings)
    slacker = SlackActivities(pool, slack) if slack is not None else None
    channels: list[NotificationChannel] = [WebhookChannel(webhooks)]
    if mailer is not None:
        channels.append(MailChannel(mailer))
    if slacker is not None:
        channels.append(SlackChannel(slacker))
    read_model = ReadModelActivities(pool, channels=channels)
    deps = WorkerDeps(pool=pool, backend=backend, artifact_dir=artifact_dir,
                      kinds=registry.worker_deps(settings), read_model=read_model)
    shared: list[Callable[..., Any]] = [read_model.record, webhooks.pending,
        webhooks.deliver, webhooks.give_up, retention.purge_batch,
        DecisionPolicyActivities(pool).evaluate]
    if mailer is not None:
        shared.append(mailer.send)
    if slacker is not None:
        shared.append(slacker.sync)
    activities: dict[str, Callable[..., Any]] = {}
    for function in [*shared, *registry.activities(deps)]:
        # Kinds may share an activity; each name is registered once.
        activities.setdefault(activity_name(function), function)
    return Worker(
        client,
        task_queue=task_queue,
        # DecisionMail registered even without SMTP: one started while it was configured
        # still has its workflow tasks run (its activity waits, up to a day, for a worker
        # with SMTP).
        workflows=worker_workflows(registry),
        activities=list(activities.values()),
        max_cached_workflows=max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=sticky_queue_schedule_to_start_timeout,
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        unsandboxed_workflow_runner=(SandboxEveryWorkflow() if sandbox_every_workflow
                                     else UnsandboxedWorkflowRunner()),
    )


def agent_backend(settings: Settings, registry: Registry | None = None, *,
                  meter: ModelMeter | None = None) -> AgentBackend:
    """The backend WAYSTATION_AGENT_BACKEND names: a plug-in's, or a built-in one; with a
    meter, its calls, tokens and cost are counted (waystation_model_*)."""
    if registry is not None and settings.agent_backend in registry.backends:
        factory, _ = registry.backends[settings.agent_backend]
        backend = factory(settings)
    else:
        backend = backend_named(settings.agent_backend, delay_ms=settings.offline_delay_ms,
                                base_url=settings.openai_base_url,
                                api_key=settings.openai_api_key, model=settings.openai_model,
                                prices=settings.model_prices,
                                timeout_seconds=settings.openai_timeout_seconds)
    return MeteredBackend(backend, meter) if meter is not None else backend


def mail_settings(settings: Settings) -> MailSettings | None:
    """Email to deciders when WAYSTATION_SMTP_URL is set; links point at the API's public
    address and are signed with the API's secret, which checks them."""
    if settings.smtp_url is None:
        return None
    return MailSettings(smtp_url=settings.smtp_url, sender=settings.smtp_from,
                        link_base=settings.console_base, link_secret=settings.jwt_secret,
                        link_ttl=timedelta(hours=settings.decision_link_hours))


def slack_config(settings: Settings) -> SlackConfig | None:
    """Gates in Slack when WAYSTATION_SLACK_BOT_TOKEN is set (docs/slack.md)."""
    if settings.slack_bot_token is None:
        return None
    return SlackConfig(bot_token=settings.slack_bot_token.get_secret_value(),
                       api_url=settings.slack_api_url, channel=settings.slack_channel,
                       channels=settings.slack_channels, dm_deciders=settings.slack_dm_deciders,
                       console_base=settings.console_base,
                       temporal_ui_base=settings.temporal_ui_base,
                       temporal_namespace=settings.temporal_namespace)


async def run_worker(settings: Settings, registry: Registry) -> None:
    """Run until SIGINT/SIGTERM, then let running activities finish (for at most
    `graceful_shutdown_timeout`; then they are cancelled and Temporal retries them) and stop."""
    # Before the client: its TracingInterceptor and the pool's queries use this provider.
    configure_tracing(settings, "waystation-worker")
    runtime = metrics_runtime(settings)
    client = await connect_temporal(settings, runtime=runtime)
    pool = await create_pool(login_url(settings, WORKER_ROLE))
    async with pool.acquire() as conn:
        await events_repo.maintain_partitions(conn)
    meter = ModelMeter((runtime or Runtime.default()).metric_meter)
    backend = agent_backend(settings, registry, meter=meter)
    registry.configure_worker(WorkerSetup(settings=settings, meter=meter))
    worker = build_worker(client, pool, task_queue=settings.temporal_task_queue,
                          backend=backend, registry=registry,
                          max_cached_workflows=settings.worker_max_cached_workflows,
                          artifact_dir=settings.artifact_path,
                          settings=settings,
                          retention_archive_dir=settings.retention_archive_dir,
                          graceful_shutdown_timeout=timedelta(
                              seconds=settings.graceful_shutdown_timeout),
                          mail=mail_settings(settings),
                          sandbox_every_workflow=settings.sandbox_every_workflow)
    await ensure_retention_schedule(client, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker polling task queue %s", settings.temporal_task_queue)
    with startup_heap_frozen():
        async with worker:
            await stop.wait()
    await backend.aclose()
    await pool.close()
