"""Static checks of the production packaging: docker-compose.yml, Dockerfile, .dockerignore.

No Docker needed: the files are parsed and checked against what the code reads (Settings env
names, the custom search attributes the workflows set).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import AliasChoices, AliasPath

from waystation.engine_settings import ENGINE_SETTINGS
from waystation.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

EXPECTED_SERVICES = {"temporal-db", "temporal-schema", "temporal", "temporal-setup", "temporal-ui",
                     "db", "migrate", "api", "worker"}
APP_SERVICES = ("migrate", "api", "worker")
REQUIRED_APP_ENV = ("TEMPORAL_ADDRESS", "DATABASE_URL", "WAYSTATION_JWT_SECRET",
                    "WAYSTATION_SECRETS_KEY")
# Secrets that must be supplied by the operator: `${VAR:?message}`, never a default.
SECRETS = ("POSTGRES_PASSWORD", "WAYSTATION_JWT_SECRET", "WAYSTATION_SECRETS_KEY",
           "WAYSTATION_API_DATABASE_PASSWORD", "WAYSTATION_WORKER_DATABASE_PASSWORD")
# Who each service logs in to the read model as, and with which password (issue 38 item 7).
DATABASE_LOGINS = {"migrate": ("waystation", "POSTGRES_PASSWORD"),
                   "api": ("waystation_api", "WAYSTATION_API_DATABASE_PASSWORD"),
                   "worker": ("waystation_worker", "WAYSTATION_WORKER_DATABASE_PASSWORD")}
VALID_CONDITIONS = {
    "service_started",
    "service_healthy",
    "service_completed_successfully",
}
HEALTHCHECKED = ("temporal-db", "db", "temporal", "api")


# ------------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict), "docker-compose.yml must be a mapping"
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    svcs = compose.get("services")
    assert isinstance(svcs, dict) and svcs, "docker-compose.yml has no services"
    return svcs


def settings_env_names() -> set[str]:
    """Every environment variable name Settings reads (case-insensitively, upper-cased here)."""
    names: set[str] = set()
    prefix = (Settings.model_config.get("env_prefix") or "").upper()

    def add(alias: object) -> None:
        if isinstance(alias, str):
            names.add(alias.upper())
        elif isinstance(alias, AliasPath):
            if alias.path and isinstance(alias.path[0], str):
                names.add(alias.path[0].upper())
        elif isinstance(alias, AliasChoices):
            for choice in alias.choices:
                add(choice)

    for field_name, field in Settings.model_fields.items():
        if field.validation_alias is not None:
            add(field.validation_alias)
        elif field.alias is not None:
            add(field.alias)
        else:
            names.add(prefix + field_name.upper())
    return names


def env_mapping(service: dict[str, Any]) -> dict[str, Any]:
    """A service's `environment` as a dict, whichever of the two compose forms it uses."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        out: dict[str, Any] = {}
        for item in env:
            key, sep, value = str(item).partition("=")
            out[key] = value if sep else None
        return out
    assert isinstance(env, dict), f"environment must be a list or mapping, got {env!r}"
    return env


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """`depends_on` as {service: condition}; the short list form means service_started."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def command_words(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def healthcheck_text(service: dict[str, Any]) -> str:
    test = (service.get("healthcheck") or {}).get("test")
    return " ".join(test) if isinstance(test, list) else str(test or "")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    out = []
    for line in joined:
        instr, _, args = line.partition(" ")
        out.append((instr.upper(), args.strip()))
    return out


# ------------------------------------------------------------------------------- compose


def test_expected_services_exist(services: dict[str, Any]) -> None:
    missing = EXPECTED_SERVICES - services.keys()
    assert not missing, f"missing services: {sorted(missing)}"


def test_depends_on_conditions_are_valid_and_reference_services(services: dict[str, Any]) -> None:
    for name, svc in services.items():
        for dep, condition in depends_on(svc).items():
            assert dep in services, f"{name} depends on unknown service {dep!r}"
            assert dep != name, f"{name} depends on itself"
            assert condition in VALID_CONDITIONS, f"{name} -> {dep}: bad condition {condition!r}"
            if condition == "service_healthy":
                assert services[dep].get("healthcheck"), (
                    f"{name} waits for {dep} to be healthy but {dep} has no healthcheck"
                )


def test_dependency_graph_has_no_cycles(services: dict[str, Any]) -> None:
    state: dict[str, str] = {}

    def visit(node: str, path: tuple[str, ...]) -> None:
        if state.get(node) == "done":
            return
        assert state.get(node) != "active", f"dependency cycle: {' -> '.join(path + (node,))}"
        state[node] = "active"
        for dep in depends_on(services[node]):
            visit(dep, path + (node,))
        state[node] = "done"

    for name in services:
        visit(name, ())


def test_dependency_order(services: dict[str, Any]) -> None:
    assert depends_on(services["temporal"]).get("temporal-db") == "service_healthy"
    assert depends_on(services["migrate"]).get("db") == "service_healthy"
    for name in ("api", "worker"):
        deps = depends_on(services[name])
        assert deps.get("migrate") == "service_completed_successfully", name
        assert deps.get("temporal") == "service_healthy", name


def test_app_services_build_from_the_same_dockerfile(services: dict[str, Any]) -> None:
    builds = []
    for name in APP_SERVICES:
        build = services[name].get("build")
        assert build is not None, f"{name} must be built from the Dockerfile"
        if isinstance(build, str):
            build = {"context": build}
        context = build.get("context", ".")
        dockerfile = build.get("dockerfile", "Dockerfile")
        assert (ROOT / context / dockerfile).resolve() == DOCKERFILE, (
            f"{name} builds from {context}/{dockerfile}, not the root Dockerfile"
        )
        builds.append((context, dockerfile))
    assert len(set(builds)) == 1, f"app services use different builds: {builds}"


def test_app_service_commands(services: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        words = command_words(services[name])
        # Either the full `waystation <sub>` or just `<sub>` after a waystation entrypoint.
        assert words and words[-1] == name, f"{name} should run `waystation {name}`, got {words}"
        assert words[0] in ("waystation", name), words


def test_app_env_keys_are_settings_env_names(services: dict[str, Any]) -> None:
    known = settings_env_names()
    assert {"TEMPORAL_ADDRESS", "DATABASE_URL", "WAYSTATION_JWT_SECRET"} <= known
    for name in APP_SERVICES:
        unknown = {key for key in env_mapping(services[name]) if key.upper() not in known}
        assert not unknown, f"{name} sets env vars Settings never reads: {sorted(unknown)}"


def test_app_env_has_required_settings(services: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        env = env_mapping(services[name])
        for key in REQUIRED_APP_ENV:
            assert env.get(key), f"{name} lacks {key}"
        assert env.get("WAYSTATION_ENV") == "production", (
            f"{name} must run WAYSTATION_ENV=production"
        )
        assert env["WAYSTATION_JWT_SECRET"].startswith("${WAYSTATION_JWT_SECRET:?"), name
        user, password = DATABASE_LOGINS[name]
        assert env["DATABASE_URL"].startswith(f"postgresql://{user}:${{{password}:?"), name
        host = env["DATABASE_URL"].rsplit("@", 1)[-1].split("/", 1)[0].split(":", 1)[0]
        assert host == "db", f"{name} DATABASE_URL should point at the db service, not {host!r}"
        assert env["TEMPORAL_ADDRESS"].split(":", 1)[0] == "temporal", name


def test_secrets_must_be_supplied() -> None:
    text = COMPOSE_FILE.read_text()
    for secret in SECRETS:
        refs = re.findall(r"\$\{" + secret + r"([^A-Za-z0-9_][^}]*)?\}", text)
        assert refs, f"{secret} is never referenced"
        for suffix in refs:
            assert suffix.startswith(":?"), (
                f"${{{secret}{suffix}}} must be required, i.e. ${{{secret}:?message}}"
            )
        assert not re.search(r"\$" + secret + r"\b", text), f"unbraced ${secret} reference"


def test_postgres_passwords_are_required(services: dict[str, Any]) -> None:
    for name in ("temporal-db", "db"):
        password = str(env_mapping(services[name]).get("POSTGRES_PASSWORD", ""))
        assert re.fullmatch(r"\$\{[A-Z0-9_]+:\?[^}]*\}", password), (
            f"{name} POSTGRES_PASSWORD must be ${{VAR:?message}}, got {password!r}"
        )


@pytest.mark.parametrize("name", HEALTHCHECKED)
def test_healthchecks_exist(services: dict[str, Any], name: str) -> None:
    hc = services[name].get("healthcheck")
    assert hc and not hc.get("disable"), f"{name} needs a healthcheck"
    assert healthcheck_text(services[name]).strip(), f"{name} healthcheck has no test"


def test_healthcheck_commands(services: dict[str, Any]) -> None:
    for name in ("temporal-db", "db"):
        assert "pg_isready" in healthcheck_text(services[name]), name
    temporal = healthcheck_text(services["temporal"])
    assert "nc -z" in temporal and "7233" in temporal, temporal
    # Readiness (Postgres and Temporal answer) gates what waits for the API.
    assert "/readyz" in healthcheck_text(services["api"])
    assert ":9464/metrics" in healthcheck_text(services["worker"])


def test_postgres_images(services: dict[str, Any]) -> None:
    for name in ("temporal-db", "db"):
        assert str(services[name]["image"]).startswith("postgres:16"), name


def test_temporal_uses_postgres(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    assert str(temporal["image"]).startswith("temporalio/server:"), "not the auto-setup image"
    env = env_mapping(temporal)
    assert env.get("DB") == "postgres12"
    assert env.get("POSTGRES_SEEDS") == "temporal-db"
    assert str(env.get("POSTGRES_PWD", "")).startswith("${"), "Temporal DB password is hardcoded"


def test_temporal_runs_with_the_engine_settings(services: dict[str, Any]) -> None:
    """The compose server's dynamic config is the dev server's engine settings."""
    temporal = services["temporal"]
    path = env_mapping(temporal)["DYNAMIC_CONFIG_FILE_PATH"]
    mounts = dict(reversed(str(volume).rsplit(":", 2)[:2]) for volume in temporal["volumes"])
    dynamic = yaml.safe_load((ROOT / mounts[path]).read_text())
    assert {key: values[0]["value"] for key, values in dynamic.items()} == {
        key: yaml.safe_load(value) for key, value in ENGINE_SETTINGS.items()}


def test_temporal_schema_is_set_up_before_the_server(services: dict[str, Any]) -> None:
    schema = services["temporal-schema"]
    script = f"{schema.get('entrypoint')} {schema.get('command')}"
    for database, folder in (("temporal", "temporal"), ("temporal_visibility", "visibility")):
        assert f"--db {database} update-schema -d $$schema/{folder}/versioned" in script
    assert "setup-schema -v 0.0" in script and "--plugin postgres12" in script
    assert str(env_mapping(schema).get("SQL_PASSWORD", "")).startswith("${TEMPORAL_POSTGRES")
    assert depends_on(services["temporal"]).get("temporal-schema") == (
        "service_completed_successfully")
    setup = services["temporal-setup"]
    assert "namespace create" in str(setup.get("command"))


def test_temporal_images_match_the_dev_server(services: dict[str, Any]) -> None:
    """The server, its tools and the UI are the versions `waystation up` runs."""
    import subprocess

    from waystation.devstack import find_temporal_binary

    version = subprocess.run([find_temporal_binary(), "--version"], capture_output=True,
                             text=True, check=True, timeout=30).stdout
    server, ui = re.search(r"Server ([\d.]+), UI ([\d.]+)", version).groups()  # type: ignore[union-attr]
    assert services["temporal"]["image"] == f"temporalio/server:{server}"
    for name in ("temporal-schema", "temporal-setup"):
        assert services[name]["image"] == f"temporalio/admin-tools:{server}", name
    assert services["temporal-ui"]["image"] == f"temporalio/ui:{ui}"


def test_api_and_workers_share_the_artifact_volume(compose: dict[str, Any],
                                                   services: dict[str, Any]) -> None:
    folders = set()
    for name in ("api", "worker"):
        folder = env_mapping(services[name])["WAYSTATION_ARTIFACT_DIR"]
        mounts = [str(v) for v in services[name].get("volumes", [])]
        assert f"artifacts:{folder}" in mounts, (name, mounts)
        folders.add(folder)
    assert len(folders) == 1 and "artifacts" in compose["volumes"]
    # The image creates the folder for its non-root user, so a new volume gets that owner.
    runs = " ".join(args for instr, args in dockerfile_instructions() if instr == "RUN")
    assert f"mkdir -p {folders.pop()}" in runs


def test_temporal_ui(services: dict[str, Any]) -> None:
    ui = services["temporal-ui"]
    assert str(ui["image"]).startswith("temporalio/ui")
    assert env_mapping(ui).get("TEMPORAL_ADDRESS") == "temporal:7233"
    # Published on localhost only: the UI has no sign-in of its own (issue 25).
    assert [str(p) for p in ui.get("ports", [])] == ["127.0.0.1:8233:8080"]


def _indexed_type_name(key: Any) -> str:
    from temporalio.api.enums.v1 import IndexedValueType

    raw = IndexedValueType.Name(key.indexed_value_type).removeprefix("INDEXED_VALUE_TYPE_")
    return "".join(part.capitalize() for part in raw.split("_"))  # KEYWORD_LIST -> KeywordList


def test_custom_search_attributes_are_registered(services: dict[str, Any]) -> None:
    from waystation.workflows import search_attributes

    setup = [
        (name, svc)
        for name, svc in services.items()
        if "search-attribute create" in f"{svc.get('entrypoint')} {svc.get('command')}"
    ]
    assert setup, "no service registers the custom search attributes"
    setup_name, svc = setup[0]
    script = f"{svc.get('entrypoint')} {svc.get('command')}"
    for key in search_attributes.ALL:
        type_name = _indexed_type_name(key)
        pattern = rf"\b{key.name}\b(=|\s+--type\s+){type_name}\b"
        assert re.search(pattern, script), f"{key.name} ({type_name}) is not registered"
    assert depends_on(svc).get("temporal") == "service_healthy", setup_name
    for name in ("api", "worker"):
        assert depends_on(services[name]).get(setup_name) == "service_completed_successfully", (
            f"{name} could start workflows before the search attributes exist"
        )


def test_worker_scales_out(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert int((worker.get("deploy") or {}).get("replicas", 1)) >= 2
    assert "container_name" not in worker, "container_name prevents running replicas"
    assert not worker.get("ports"), "published ports collide across replicas"


def test_api_listens_on_all_interfaces_and_publishes_its_port(services: dict[str, Any]) -> None:
    api = services["api"]
    env = env_mapping(api)
    port = str(env.get("WAYSTATION_API_PORT", 8000))
    if env.get("WAYSTATION_API_HOST") is not None:
        assert env["WAYSTATION_API_HOST"] == "0.0.0.0"
    targets = [str(p).rsplit(":", 1)[-1].split("/", 1)[0] for p in api.get("ports", [])]
    assert port in targets, f"api listens on {port} but publishes {api.get('ports')}"
    assert f":{port}/readyz" in healthcheck_text(api)


# ------------------------------------------------------------------------------- Dockerfile


def test_dockerfile_base_and_install() -> None:
    instructions = dockerfile_instructions()
    froms = [args for instr, args in instructions if instr == "FROM"]
    assert froms and froms[-1].split()[0] == "python:3.11-slim", froms
    runs = " ".join(args for instr, args in instructions if instr == "RUN")
    assert re.search(r"\bpip install\b", runs), "the Dockerfile must install with pip install"


def test_dockerfile_runs_waystation_as_non_root() -> None:
    instructions = dockerfile_instructions()
    last_stage = instructions[
        max(i for i, (instr, _) in enumerate(instructions) if instr == "FROM") :
    ]
    users = [args for instr, args in last_stage if instr == "USER"]
    assert users, "the final image must switch to a non-root USER"
    assert users[-1].split(":")[0] not in ("root", "0"), users[-1]
    launch = " ".join(args for instr, args in last_stage if instr in ("CMD", "ENTRYPOINT"))
    assert "waystation" in launch, f"CMD/ENTRYPOINT should run waystation, got {launch!r}"
    assert "api" in launch, "the default command should be `waystation api`"
    env = " ".join(args for instr, args in last_stage if instr == "ENV")
    assert re.search(r"WAYSTATION_API_HOST[= ]0\.0\.0\.0", env), "API must bind 0.0.0.0"
    # A plain `docker run` is production: the dev secrets in the source are refused.
    assert re.search(r"WAYSTATION_ENV[= ]production", env), "the image must default to production"


def test_dockerignore_keeps_what_pip_install_needs() -> None:
    patterns = {
        line.strip().rstrip("/")
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for needed in (
        "pyproject.toml",
        "README.md",
        "waystation",
        "workflows",
        "activities",
        "persistence",
        "api",
        "contracts",
        "kinds",
        "*",
        "**",
    ):
        assert needed not in patterns, f".dockerignore excludes {needed}"
    assert ".git" in patterns
    assert ".env" in patterns, "local secrets must stay out of the build context"


def test_only_migrate_logs_in_as_the_owner(services: dict[str, Any]) -> None:
    """The API and workers log in as roles that cannot leave row-level security, and do not
    migrate (they could not); `migrate` sets those roles' passwords."""
    for name in ("api", "worker"):
        assert env_mapping(services[name])["WAYSTATION_MIGRATE_ON_START"] == "false", name
    migrate = env_mapping(services["migrate"])
    for _, password in (DATABASE_LOGINS["api"], DATABASE_LOGINS["worker"]):
        assert migrate[password].startswith(f"${{{password}:?"), password


def test_temporal_grpc_is_not_published(services: dict[str, Any]) -> None:
    """Temporal's frontend has no sign-in: nothing outside the stack's network may reach it."""
    assert not services["temporal"].get("ports"), services["temporal"].get("ports")


def test_api_answers_to_its_service_name(services: dict[str, Any]) -> None:
    hosts = env_mapping(services["api"])["WAYSTATION_ALLOWED_HOSTS"]
    assert {"api", "localhost", "127.0.0.1"} <= set(hosts.split(":-", 1)[1].rstrip("}")
                                                    .split(","))
