"""The `waystation` command: run the stack, its parts, and a guided demo."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING

from pydantic import ValidationError

from waystation.contracts.kinds import PluginError
from waystation.logs import configure_logging
from waystation.settings import Settings, load_settings

if TYPE_CHECKING:
    from waystation.registry import Registered

log = logging.getLogger("waystation")
# The commands of the CLI's own that need no kind: loading every kind (their workflows, agent
# frameworks) costs seconds, which `TOKEN=$(waystation token ...)` should not pay.
COMMANDS_WITHOUT_KINDS = frozenset({
    "up", "worker", "api", "migrate", "schema", "secrets-key", "reseal-secrets", "token",
    "console-link", "kinds", "agents", "replay", "runs"})

# ---------------------------------------------------------------- flags -> environment


def _common_flags() -> argparse.ArgumentParser:
    """Flags every subcommand accepts; they become env vars so Settings (and children) see them."""
    # SUPPRESS defaults: the flags may come before or after the subcommand, and the
    # subcommand's parser must not overwrite a value given before it with None.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--data-dir", help="data folder (WAYSTATION_DATA_DIR)")
    common.add_argument("--api-port", type=int, help="API port (WAYSTATION_API_PORT)")
    common.add_argument("--temporal-port", type=int, help="Temporal gRPC port (TEMPORAL_ADDRESS)")
    common.add_argument("--ui-port", type=int, help="Temporal Web UI port (TEMPORAL_UI_PORT)")
    common.add_argument("--namespace", help="Temporal namespace (TEMPORAL_NAMESPACE)")
    common.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return common


def apply_flags_to_env(args: argparse.Namespace) -> None:
    flags = vars(args)
    if flags.get("data_dir"):
        os.environ["WAYSTATION_DATA_DIR"] = str(flags["data_dir"])
    if flags.get("api_port"):
        os.environ["WAYSTATION_API_PORT"] = str(flags["api_port"])
    if flags.get("temporal_port"):
        host = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233").rpartition(":")[0]
        os.environ["TEMPORAL_ADDRESS"] = f"{host or '127.0.0.1'}:{flags['temporal_port']}"
    if flags.get("ui_port"):
        os.environ["TEMPORAL_UI_PORT"] = str(flags["ui_port"])
    if flags.get("namespace"):
        os.environ["TEMPORAL_NAMESPACE"] = flags["namespace"]


def build_parser(kinds: dict[str, Registered]) -> argparse.ArgumentParser:
    """The CLI's own commands, then the kinds' (`CliHooks.commands`) and the demos of
    `kinds` (`CliHooks.demo`)."""
    common = _common_flags()
    parser = argparse.ArgumentParser(prog="waystation", description=__doc__, parents=[common])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser(
        "up", parents=[common],
        help="run Temporal dev server, Postgres, worker and API together",
    )  # fmt: skip
    sub.add_parser("worker", parents=[common], help="run the Temporal worker")
    sub.add_parser("api", parents=[common], help="run the HTTP API")
    sub.add_parser("migrate", parents=[common], help="apply database migrations")
    schema = sub.add_parser("schema", parents=[common],
                            help="print the schema the migrations produce (a scratch database "
                                 "on the configured server)")
    schema.add_argument("--write", action="store_true",
                        help="write it to persistence/schema.sql instead")
    sub.add_parser("secrets-key", parents=[common],
                   help="print a new key for WAYSTATION_SECRETS_KEY")
    sub.add_parser("reseal-secrets", parents=[common],
                   help="seal every webhook secret under WAYSTATION_SECRETS_KEY's first key")

    token = sub.add_parser("token", parents=[common], help="print a signed API token")
    token.add_argument("--user", required=True)
    token.add_argument("--role", choices=("user", "service"), default="user")
    token.add_argument("--ttl", type=int, default=30 * 24 * 3600, help="lifetime in seconds")

    link = sub.add_parser("console-link", parents=[common],
                          help="print a one-time URL that signs a browser in to the console")
    link.add_argument("--user", required=True)
    link.add_argument("--role", choices=("user", "service"), default="user")

    sub.add_parser("kinds", parents=[common],
                   help="list the registered run kinds and agent backends, with their source")
    sub.add_parser("agents", parents=[common],
                   help="list the registered agents: name, framework and source, one a line")
    replay = sub.add_parser(
        "replay", parents=[common],
        help="replay the cluster's histories against the code installed now (exit 1 if any breaks)")
    replay.add_argument("--open", action="store_true", required=True, dest="open_runs",
                        help="every open execution")
    replay.add_argument("--closed", type=int, default=0, metavar="N",
                        help="also the N most recent closed executions")
    replay.add_argument("--query", help="a visibility filter ANDed to the selection")
    doctor = sub.add_parser(
        "doctor", parents=[common],
        help="run a chain of empty activities and a few short timers on the cluster: is the"
        " engine throttled?")
    doctor.add_argument("--activities", type=int, default=None,
                        help="activities in the chain (default: enough to spend a default"
                        " reader's burst of polls)")
    runs = sub.add_parser("runs", parents=[common], help="open runs on the cluster")
    runs.add_argument("--open", action="store_true", required=True, dest="open_runs")
    runs.add_argument("--by-version", action="store_true", required=True,
                      help="grouped by the code that started them")
    runs.add_argument("--query", help="a visibility filter ANDed to the selection")
    demos = {name: r.kind.cli.demo for name, r in kinds.items() if r.kind.cli.demo is not None}
    demo = sub.add_parser("demo", parents=[common],
                          help="start a demo run on a running stack and show it to its first gate")
    demo.add_argument("--kind", choices=list(demos), default=next(iter(demos), None),
                      help="; ".join(f"{name}: {d.help}" for name, d in demos.items()))
    demo.add_argument("--api", help="API base URL (default from settings)")
    demo.add_argument("--token", help="bearer token (default: a dev token for user `dev`)")
    for name, registered in kinds.items():
        for command in registered.kind.cli.commands:
            if command.name in sub.choices:
                raise PluginError(f"{registered.source}: kind {name!r}'s command "
                                  f"{command.name!r} is taken")
            parser_of_command = sub.add_parser(command.name, parents=[common], help=command.help)
            parser_of_command.set_defaults(kind_command=command)
            if command.configure is not None:
                command.configure(parser_of_command)
    return parser


def _kinds_for(argv: list[str]) -> dict[str, Registered]:
    """The registered kinds (built-ins, entry points, WAYSTATION_PLUGINS modules) unless the
    command is one of the CLI's own that needs none; a plug-in's error surfaces here."""
    # No abbreviations: a subcommand's own `--api` is not `--api-port`.
    first = argparse.ArgumentParser(add_help=False, allow_abbrev=False,
                                    parents=[_common_flags()])
    first.add_argument("command", nargs="?")
    if first.parse_known_args(argv)[0].command in COMMANDS_WITHOUT_KINDS:
        return {}
    from waystation.registry import load_registry

    return load_registry(load_settings().plugin_modules).kinds


# ---------------------------------------------------------------- subcommands


def _with_database_url(settings: Settings) -> Settings:
    """Resolve DATABASE_URL once (starting the embedded server if unset) for this process."""
    if settings.database_url:
        return settings
    from waystation.database import resolve_database_url

    url = resolve_database_url(settings)
    os.environ["DATABASE_URL"] = url
    return settings.model_copy(update={"database_url": url})


def cmd_up(settings: Settings) -> int:
    from waystation.devstack import DevStackError, run_devstack

    try:
        asyncio.run(run_devstack(settings))
    except DevStackError as exc:
        print(f"waystation up: {exc}", file=sys.stderr)
        return 1
    return 0


def _migrated(settings: Settings) -> Settings:
    """Apply pending migrations before serving, so workers and APIs may be started in any
    order on an empty database; the advisory lock lets exactly one of them do it. Not with
    WAYSTATION_MIGRATE_ON_START=false: the process logs in as a role that may not migrate."""
    from waystation.database import migrate

    settings = _with_database_url(settings)
    assert settings.database_url is not None
    if not settings.migrate_on_start:
        return settings
    applied = asyncio.run(migrate(settings.database_url, settings=settings))
    if applied:
        log.info("applied migrations: %s", applied)
    return settings


def cmd_worker(settings: Settings) -> int:
    from waystation.registry import load_registry
    from waystation.worker import run_worker

    registry = load_registry(settings.plugin_modules)  # a broken plug-in stops us here
    registry.check_settings(settings)
    asyncio.run(run_worker(_migrated(settings), registry))
    return 0


def cmd_api(settings: Settings) -> int:

    from waystation.api.app import create_app
    from waystation.api.serving import server_config
    from waystation.api.shutdown import ApiServer
    from waystation.registry import load_registry
    from waystation.telemetry import configure_tracing

    registry = load_registry(settings.plugin_modules)  # a broken plug-in stops us here
    registry.check_settings(settings)
    settings = _migrated(settings)
    provider = configure_tracing(settings, "waystation-api")
    app = create_app(settings, tracer_provider=provider, registry=registry)
    # log_config None: uvicorn's records go through the process's logging (JSON or text)
    # instead of formats of its own.
    config = server_config(app, host=settings.api_host, port=settings.api_port,
                           log_config=None,
                           timeout_graceful_shutdown=settings.graceful_shutdown_timeout)
    ApiServer(config, app.state.shutdown).run()
    return 0


def cmd_migrate(settings: Settings) -> int:
    from waystation.database import migrate

    settings = _with_database_url(settings)
    assert settings.database_url is not None
    applied = asyncio.run(migrate(settings.database_url, settings=settings))
    print(f"applied migrations: {applied}" if applied else "database is up to date")
    return 0


def cmd_schema(settings: Settings, args: argparse.Namespace) -> int:
    from waystation.persistence.schema_dump import SCHEMA_FILE, dump_schema
    from waystation.registry import load_registry

    settings = _with_database_url(settings)
    assert settings.database_url is not None
    # What `waystation migrate` applies here: the core's and every installed kind's migrations
    # (built in or a plug-in, kinds/mobile's too where the README's commands installed it).
    folders = load_registry(settings.plugin_modules).migration_folders()
    schema = asyncio.run(dump_schema(settings.database_url, folders))
    if args.write:
        SCHEMA_FILE.write_text(schema)
        print(f"wrote {SCHEMA_FILE}")
    else:
        print(schema, end="")
    return 0


def cmd_secrets_key() -> int:
    from waystation.persistence.sealing import new_key

    print(new_key())
    return 0


def cmd_reseal_secrets(settings: Settings) -> int:
    """After putting a new key first in WAYSTATION_SECRETS_KEY (then the old one can go), or
    once after an upgrade from a version that stored webhook secrets in clear."""
    import asyncpg

    from waystation.persistence.webhooks import reseal_secrets

    settings = _with_database_url(settings)
    assert settings.database_url is not None

    async def reseal() -> int:
        conn = await asyncpg.connect(settings.database_url)
        try:
            done = await reseal_secrets(conn, settings.secrets_box)
        finally:
            await conn.close()
        print(f"webhook secrets: {done.resealed} sealed under the first key, "
              f"{done.unchanged} already were")
        if done.unreadable:
            print(f"{len(done.unreadable)} sealed under a key not in WAYSTATION_SECRETS_KEY "
                  f"(left as they are): {', '.join(map(str, done.unreadable))}",
                  file=sys.stderr)
            return 1
        return 0

    return asyncio.run(reseal())


def cmd_token(settings: Settings, args: argparse.Namespace) -> int:
    from waystation.api.auth import issue_token

    # Only the token on stdout, so `TOKEN=$(waystation token --user me)` works.
    print(issue_token(settings.jwt_secret, args.user, role=args.role, ttl_seconds=args.ttl))
    return 0


def cmd_console_link(settings: Settings, args: argparse.Namespace) -> int:
    import asyncpg

    from waystation.api.auth import issue_login_code

    if not args.user.strip() or len(args.user) > 200:
        print("--user must be 1 to 200 characters", file=sys.stderr)
        return 2
    settings = _migrated(settings)

    async def issue() -> str:
        conn = await asyncpg.connect(settings.database_url)
        try:
            return await issue_login_code(conn, args.user, args.role,
                                          ttl_seconds=settings.console_login_code_seconds)
        finally:
            await conn.close()

    # Only the URL on stdout; it signs one browser in once, within the code's lifetime.
    print(f"{settings.console_base}/console/login?code={asyncio.run(issue())}")
    return 0


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from waystation.demo import run_demo
    from waystation.registry import load_registry

    registry = load_registry(settings.plugin_modules)
    return run_demo(settings, registry.kinds[args.kind].kind, api=args.api, token=args.token)


def cmd_kinds(settings: Settings) -> int:
    from waystation.registry import BUILTIN_BACKENDS, load_registry
    from waystation.workflows.definitions import workflow_type

    registry = load_registry(settings.plugin_modules)
    _print_table(("KIND", "WORKFLOW", "ID PREFIX", "SOURCE"), [
        (name, workflow_type(r.kind.workflow),
         r.kind.workflow_id_prefix, r.source) for name, r in registry.kinds.items()])
    print()
    _print_table(("AGENT BACKEND", "SOURCE"), [
        *((name, "builtin") for name in BUILTIN_BACKENDS),
        *((name, source) for name, (_, source) in registry.backends.items())])
    return 0


def cmd_agents(settings: Settings) -> int:
    from waystation.registry import load_registry

    registry = load_registry(settings.plugin_modules)
    _print_table(("AGENT", "FRAMEWORK", "SOURCE"),
                 [(a.name, a.framework, a.source) for a in registry.agents])
    return 0


def _print_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """One line a row, columns padded to their widest cell (the last one left as it is)."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        print(" ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)),
                        row[-1]]))


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    from waystation.cluster_replay import check_runs, report
    from waystation.registry import load_registry
    from waystation.temporal_client import connect_temporal
    from waystation.worker import worker_workflows

    if args.closed < 0:
        print("--closed must be 0 or more", file=sys.stderr)
        return 2
    workflows = worker_workflows(load_registry(settings.plugin_modules))

    async def check() -> tuple[str, int]:
        client = await connect_temporal(settings)
        return report(await check_runs(client, workflows, closed=args.closed, query=args.query))

    text, status = asyncio.run(check())
    print(text)
    return status


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from waystation.engine_check import DOCTOR_CHAIN, DOCTOR_TIMERS, engine_report, run_chain
    from waystation.temporal_client import connect_temporal

    activities = args.activities or DOCTOR_CHAIN
    if not 2 <= activities <= 1000:
        print("--activities must be between 2 and 1000", file=sys.stderr)
        return 2

    async def chain() -> tuple[str, int]:
        client = await connect_temporal(settings)
        where = f"{settings.temporal_address}, namespace {settings.temporal_namespace}"
        return engine_report(await run_chain(client, activities, DOCTOR_TIMERS), where)

    text, status = asyncio.run(chain())
    print(text)
    return status


def cmd_runs(settings: Settings, args: argparse.Namespace) -> int:
    from waystation.run_versions import by_version, open_run_versions
    from waystation.temporal_client import connect_temporal

    async def versions() -> str:
        client = await connect_temporal(settings)
        return by_version(await open_run_versions(client, query=args.query))

    print(asyncio.run(versions()))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser(_kinds_for(argv))
    except PluginError as error:
        print(f"waystation: plug-in error: {error}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    apply_flags_to_env(args)
    if args.command == "secrets-key":  # needed before the settings can load outside dev
        return cmd_secrets_key()
    try:
        settings = load_settings()
    except ValidationError as refused:
        # A refusal to start (a dev secret outside dev, a bad value) is the operator's to
        # fix: what is wrong, on stderr, without a traceback.
        for problem in refused.errors():
            where = ".".join(str(part) for part in problem["loc"])
            print(f"waystation: refusing to start: {where + ': ' if where else ''}"
                  f"{problem['msg'].removeprefix('Value error, ')}", file=sys.stderr)
        return 2
    configure_logging(verbose=vars(args).get("verbose", False), log_format=settings.log_format)
    try:
        return _run_command(args, settings)
    except PluginError as error:
        # A broken plug-in stops the API and the worker before they serve anything.
        print(f"waystation {args.command}: plug-in error: {error}", file=sys.stderr)
        return 2


def _run_command(args: argparse.Namespace, settings: Settings) -> int:
    command = args.command
    if command == "token":
        return cmd_token(settings, args)
    if command == "demo":
        return cmd_demo(settings, args)
    if command == "console-link":
        return cmd_console_link(settings, args)
    if "kind_command" in args:
        return int(args.kind_command.run(settings, args))
    if command == "kinds":
        return cmd_kinds(settings)
    if command == "agents":
        return cmd_agents(settings)
    if command == "replay":
        return cmd_replay(settings, args)
    if command == "runs":
        return cmd_runs(settings, args)
    if command == "doctor":
        return cmd_doctor(settings, args)
    if command == "schema":
        return cmd_schema(settings, args)
    handlers = {
        "up": cmd_up, "worker": cmd_worker, "api": cmd_api, "migrate": cmd_migrate,
        "reseal-secrets": cmd_reseal_secrets,
    }  # fmt: skip
    from waystation.persistence.migrate import MigrationEdited

    try:
        return handlers[command](settings)
    except MigrationEdited as refused:  # workers, APIs and `migrate` all check first
        print(f"waystation {command}: refusing to start: {refused}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
