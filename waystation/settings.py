"""All configuration, read once from the environment.

Names follow what operators already use for Temporal (`TEMPORAL_*`) and Postgres
(`DATABASE_URL`); Waystation's own knobs are prefixed `WAYSTATION_`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from waystation.activities.agents.prices import ModelPrice
from waystation.persistence.sealing import SecretsBox, parse_keys

KindSettings = TypeVar("KindSettings", bound=BaseSettings)
DEV_JWT_SECRET = "waystation-dev-secret-change-me-0123456789"
# The names of this machine's loopback interface: the Host a local browser or client sends.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
# Seals webhook secrets on a dev stack only (persistence/sealing.py); refused elsewhere.
DEV_SECRETS_KEY = "sHvqCDLXJXUqiXJhJFgdXxIAfEzsQUjGsDUTbFQhj1k="


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    # Temporal
    temporal_address: str = Field("127.0.0.1:7233", validation_alias="TEMPORAL_ADDRESS")
    temporal_namespace: str = Field("default", validation_alias="TEMPORAL_NAMESPACE")
    temporal_task_queue: str = Field("waystation", validation_alias="TEMPORAL_TASK_QUEUE")
    temporal_tls: bool = Field(False, validation_alias="TEMPORAL_TLS")
    temporal_tls_cert: Path | None = Field(None, validation_alias="TEMPORAL_TLS_CERT")
    temporal_tls_key: Path | None = Field(None, validation_alias="TEMPORAL_TLS_KEY")
    temporal_tls_ca: Path | None = Field(None, validation_alias="TEMPORAL_TLS_CA")
    temporal_api_key: str | None = Field(None, validation_alias="TEMPORAL_API_KEY")
    temporal_ui_port: int = Field(8233, validation_alias="TEMPORAL_UI_PORT")
    # Where people open the Temporal Web UI; unset: the dev server's UI on TEMPORAL_UI_PORT.
    temporal_ui_url: str | None = Field(None, validation_alias="WAYSTATION_TEMPORAL_UI_URL")

    # Postgres: unset means the embedded server under the data folder.
    database_url: str | None = Field(None, validation_alias="DATABASE_URL")
    # The API and the workers log in as roles `waystation_api` and `waystation_worker`: as
    # DATABASE_URL's server and database, that user, these passwords (unset: none, as the
    # embedded server's local sign-in needs). `waystation migrate`, run as the owner, sets
    # them. A DATABASE_URL that names one of the two roles is used as it is.
    api_database_password: str | None = Field(
        None, validation_alias="WAYSTATION_API_DATABASE_PASSWORD")
    worker_database_password: str | None = Field(
        None, validation_alias="WAYSTATION_WORKER_DATABASE_PASSWORD")
    # `waystation api` and `worker` apply pending migrations first (as DATABASE_URL's user:
    # the owner on a dev stack). Off where a separate `waystation migrate` runs as the owner
    # and the processes log in as roles that may not change the schema (docker-compose).
    migrate_on_start: bool = Field(True, validation_alias="WAYSTATION_MIGRATE_ON_START")

    # API
    api_host: str = Field("127.0.0.1", validation_alias="WAYSTATION_API_HOST")
    api_port: int = Field(8000, validation_alias="WAYSTATION_API_PORT")
    jwt_secret: str = Field(
        DEV_JWT_SECRET, validation_alias=AliasChoices("WAYSTATION_JWT_SECRET", "JWT_SECRET")
    )
    sse_heartbeat_seconds: float = Field(
        15.0, gt=0, validation_alias="WAYSTATION_SSE_HEARTBEAT_SECONDS")
    sse_client_buffer: int = Field(10_000, ge=10, validation_alias="WAYSTATION_SSE_CLIENT_BUFFER")
    max_body_bytes: int = Field(256 * 1024, validation_alias="WAYSTATION_MAX_BODY_BYTES")
    # Per user, shared by every API replica (in Postgres); 0 turns a limit off. Over it: 429
    # with Retry-After.
    max_streams_per_user: int = Field(50, ge=0, validation_alias="WAYSTATION_MAX_STREAMS_PER_USER")
    writes_per_minute: int = Field(600, ge=0, validation_alias="WAYSTATION_WRITES_PER_MINUTE")
    # How long an open stream's slot outlives a replica that stopped renewing it (one killed
    # outright); each replica renews its streams' slots three times as often.
    stream_lease_seconds: float = Field(30.0, gt=0, le=3600,
                                        validation_alias="WAYSTATION_STREAM_LEASE_SECONDS")
    # Browser frontends on other origins (an AG-UI app): comma-separated origins such as
    # `http://localhost:5173`, or `*`. Empty: same-origin only (no CORS headers).
    cors_origins: str = Field("", validation_alias="WAYSTATION_CORS_ORIGINS")
    # The names this API answers to (the Host header), comma-separated: `api.example.com`,
    # `api.example.com:8443` (that port only), `.example.com` (it and its subdomains), `*`.
    # Unset: the loopback names and WAYSTATION_CONSOLE_URL's host. Any other Host is a 421, so
    # a page whose name an attacker rebinds to this machine's address reaches nothing.
    allowed_hosts: str = Field("", validation_alias="WAYSTATION_ALLOWED_HOSTS")
    # Browser origins besides the console's own and WAYSTATION_CORS_ORIGINS whose requests
    # `/mcp` serves (comma-separated); a request with another `Origin` is a 403.
    allowed_origins: str = Field("", validation_alias="WAYSTATION_ALLOWED_ORIGINS")
    # Live API keys one user may hold at once: a stolen token cannot mint them without bound.
    max_api_keys_per_user: int = Field(50, ge=1,
                                       validation_alias="WAYSTATION_MAX_API_KEYS_PER_USER")
    # Live webhooks one user may hold at once, each event fanning out to all of them; A2A push
    # configs (webhooks for one run) are counted apart.
    max_webhooks_per_user: int = Field(50, ge=1,
                                       validation_alias="WAYSTATION_MAX_WEBHOOKS_PER_USER")
    max_push_configs_per_user: int = Field(
        200, ge=1, validation_alias="WAYSTATION_MAX_PUSH_CONFIGS_PER_USER")
    # The most deliveries of one event one notification workflow sends; a larger fan-out is
    # shared among child workflows, so no history nears Temporal's limit.
    webhook_deliveries_per_workflow: int = Field(
        500, ge=1, le=2000, validation_alias="WAYSTATION_WEBHOOK_DELIVERIES_PER_WORKFLOW")

    # Web console: the base URL `console-link` prints (unset: http://API_HOST:API_PORT),
    # browser session and sign-in code lifetimes, and the cookie's Secure flag (unset: Secure
    # everywhere but WAYSTATION_ENV=dev, whose plain-HTTP localhost would drop the cookie).
    console_url: str | None = Field(None, validation_alias="WAYSTATION_CONSOLE_URL")
    console_session_hours: float = Field(
        12.0, gt=0, le=24 * 30, validation_alias="WAYSTATION_CONSOLE_SESSION_HOURS")
    console_login_code_seconds: int = Field(
        600, ge=30, le=3600, validation_alias="WAYSTATION_CONSOLE_LOGIN_CODE_SECONDS")
    console_cookie_secure: bool | None = Field(
        None, validation_alias="WAYSTATION_CONSOLE_COOKIE_SECURE")

    # Tokens of an identity provider (RS256/ES256), besides this installation's HS256 ones:
    # its JWKS, the audience and issuer they must name, and the clock leeway.
    jwks_url: str | None = Field(None, pattern=r"^https?://",
                                 validation_alias="WAYSTATION_JWKS_URL")
    jwt_audience: str | None = Field(None, validation_alias="WAYSTATION_JWT_AUDIENCE")
    jwt_issuer: str | None = Field(None, validation_alias="WAYSTATION_JWT_ISSUER")
    jwt_leeway_seconds: float = Field(30.0, ge=0, le=300,
                                      validation_alias="WAYSTATION_JWT_LEEWAY_SECONDS")

    # Console sign-in through an OpenID Connect provider (authorization code with PKCE); unset
    # issuer: console links only. Discovery is at <issuer>/.well-known/openid-configuration;
    # the ID token's `user_claim` names the Waystation user.
    oidc_issuer: str | None = Field(None, pattern=r"^https?://",
                                    validation_alias="WAYSTATION_OIDC_ISSUER")
    oidc_client_id: str | None = Field(None, min_length=1,
                                       validation_alias="WAYSTATION_OIDC_CLIENT_ID")
    oidc_client_secret: str | None = Field(None, min_length=1,
                                           validation_alias="WAYSTATION_OIDC_CLIENT_SECRET")
    oidc_scopes: str = Field("openid profile email", pattern=r"(^|\s)openid(\s|$)",
                             validation_alias="WAYSTATION_OIDC_SCOPES")
    oidc_user_claim: str = Field("sub", min_length=1, validation_alias="WAYSTATION_OIDC_USER_CLAIM")
    # The name on the console's sign-in button; unset: the issuer's host name.
    oidc_provider_name: str | None = Field(None, min_length=1, max_length=60,
                                           validation_alias="WAYSTATION_OIDC_PROVIDER_NAME")

    # Email to the people who may decide a request (worker), with links to
    # CONSOLE_URL/decide-link/... valid for at most `decision_link_hours`; unset: no email.
    smtp_url: str | None = Field(None, pattern=r"^smtps?://",
                                 validation_alias="WAYSTATION_SMTP_URL")
    smtp_from: str = Field("waystation@localhost", validation_alias="WAYSTATION_SMTP_FROM")
    decision_link_hours: float = Field(
        72.0, gt=0, le=24 * 90, validation_alias="WAYSTATION_DECISION_LINK_HOURS")

    # Gates in Slack (docs/slack.md): the app's bot token and signing secret (never logged),
    # the channel gates go to when nothing more specific is set, more specific ones as JSON
    # ({"project:<id>" | "group:<uuid>" | "kind:<name>": channel id}), whether each linked
    # decider also gets a DM, the Web API's base URL (a stand-in's in tests), how long a
    # `/waystation link` link stays valid, and how a Slack user is linked: by that command,
    # by the e-mail address Slack confirmed (only where the identity provider's verified
    # e-mail names users), or either. Unset token: no Slack.
    slack_bot_token: SecretStr | None = Field(None, validation_alias="WAYSTATION_SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(
        None, validation_alias="WAYSTATION_SLACK_SIGNING_SECRET")
    slack_channel: str | None = Field(None, min_length=1,
                                      validation_alias="WAYSTATION_SLACK_CHANNEL")
    slack_channels: dict[str, str] = Field(default_factory=dict,
                                           validation_alias="WAYSTATION_SLACK_CHANNELS")
    slack_dm_deciders: bool = Field(False, validation_alias="WAYSTATION_SLACK_DM_DECIDERS")
    slack_api_url: str = Field("https://slack.com/api/", pattern=r"^https?://",
                               validation_alias="WAYSTATION_SLACK_API_URL")
    slack_link_minutes: float = Field(15, gt=0, le=24 * 60,
                                      validation_alias="WAYSTATION_SLACK_LINK_MINUTES")
    slack_link_by: Literal["command", "email", "both"] = Field(
        "command", validation_alias="WAYSTATION_SLACK_LINK_BY")

    # Webhooks to loopback, private and CGNAT addresses (a team's receiver on its own
    # network); unset: allowed only with WAYSTATION_ENV=dev, so on a shared deployment no user
    # can make the worker call its neighbours. Link-local addresses and cloud metadata
    # services are refused either way.
    webhook_private_networks: bool | None = Field(
        None, validation_alias="WAYSTATION_WEBHOOK_PRIVATE_NETWORKS")
    # Seals webhook secrets in the database: one Fernet key or several, comma-separated (the
    # first seals, each opens), so a key rotates without a webhook missing a delivery.
    secrets_key: str = Field(DEV_SECRETS_KEY, validation_alias="WAYSTATION_SECRETS_KEY")

    # Runtime
    env: str = Field("dev", validation_alias="WAYSTATION_ENV")
    data_dir: Path = Field(Path("~/.waystation"), validation_alias="WAYSTATION_DATA_DIR")
    agent_backend: str = Field("offline", validation_alias="WAYSTATION_AGENT_BACKEND")
    # Modules with RUN_KINDS / AGENT_BACKENDS to load besides the entry points, comma-separated.
    plugins: str = Field("", validation_alias="WAYSTATION_PLUGINS")
    openai_base_url: str = Field(
        "https://api.openai.com/v1", validation_alias="WAYSTATION_OPENAI_BASE_URL"
    )
    openai_api_key: str | None = Field(None, validation_alias="WAYSTATION_OPENAI_API_KEY")
    openai_model: str = Field("gpt-4o-mini", validation_alias="WAYSTATION_OPENAI_MODEL")
    openai_timeout_seconds: float = Field(
        120.0, gt=0, validation_alias="WAYSTATION_OPENAI_TIMEOUT_SECONDS")
    # USD per million tokens by model, over genai-prices' table: {"model": {"input", "output"}}.
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict, validation_alias="WAYSTATION_MODEL_PRICES")
    # Screenshots and hierarchies of mobile runs, content-addressed; unset: <data dir>/artifacts.
    artifact_dir: Path | None = Field(None, validation_alias="WAYSTATION_ARTIFACT_DIR")
    # The run kinds' own settings given in code (tests, `waystation.testing.local_stack`); a
    # kind's settings not given here are read from the environment (`of`).
    kind_settings: tuple[BaseSettings, ...] = ()
    _kinds_read: dict[type, BaseSettings] = PrivateAttr(default_factory=dict)
    offline_delay_ms: int = Field(0, ge=0, validation_alias="WAYSTATION_OFFLINE_DELAY_MS")
    # Run the built-in workflows in Temporal's sandbox too (slower; what the tests do).
    sandbox_every_workflow: bool = Field(False,
                                         validation_alias="WAYSTATION_SANDBOX_EVERY_WORKFLOW")
    worker_max_cached_workflows: int = Field(
        1000, validation_alias="WAYSTATION_WORKER_MAX_CACHED_WORKFLOWS"
    )
    otel_exporter: Literal["none", "console", "otlp"] = Field(
        "none", validation_alias="WAYSTATION_OTEL_EXPORTER")
    # Defaults to the process's role (waystation-api, waystation-worker).
    otel_service_name: str | None = Field(
        None, validation_alias=AliasChoices("WAYSTATION_OTEL_SERVICE_NAME", "OTEL_SERVICE_NAME"))

    # Operations
    # After SIGTERM: how long a worker lets running activities finish before cancelling them,
    # and how long the API waits for requests in flight (streams end at once regardless).
    graceful_shutdown_timeout: int = Field(
        30, ge=0, validation_alias="WAYSTATION_GRACEFUL_SHUTDOWN_TIMEOUT")
    # GET /metrics on the API (api/routes/metrics.py): with a token, scrapers send it as a
    # bearer token; without one, open on a dev stack and the service role's elsewhere. The
    # read model's figures are re-read at most this often.
    metrics_token: str | None = Field(None, min_length=32,
                                      validation_alias="WAYSTATION_METRICS_TOKEN")
    metrics_cache_seconds: float = Field(15.0, ge=0,
                                         validation_alias="WAYSTATION_METRICS_CACHE_SECONDS")
    # GET /workers: how old its pollers and totals (two Temporal calls and a count over every
    # item) may be, per API process; the console's poll, so any number of open consoles cost
    # one read per interval. 0 reads them on every request.
    workers_cache_seconds: float = Field(2.0, ge=0, le=60,
                                         validation_alias="WAYSTATION_WORKERS_CACHE_SECONDS")
    # The worker's Prometheus endpoint (Temporal SDK and model metrics); unset: none.
    worker_metrics_port: int | None = Field(
        None, ge=1, le=65535, validation_alias="WAYSTATION_WORKER_METRICS_PORT")
    worker_metrics_host: str = Field("127.0.0.1", validation_alias="WAYSTATION_WORKER_METRICS_HOST")
    # Retention (waystation/retention_schedule.py): runs finished this many days ago are
    # deleted (unset: kept); archived first to compressed JSONL when the folder is set.
    retention_days: float | None = Field(None, gt=0, validation_alias="WAYSTATION_RETENTION_DAYS")
    retention_archive_dir: Path | None = Field(
        None, validation_alias="WAYSTATION_RETENTION_ARCHIVE_DIR")
    retention_interval_minutes: float = Field(
        60, gt=0, validation_alias="WAYSTATION_RETENTION_INTERVAL_MINUTES")
    # Erased runs are hidden at once and deleted by the retention sweep after this long.
    erasure_grace_hours: float = Field(72, ge=0, validation_alias="WAYSTATION_ERASURE_GRACE_HOURS")
    # `json`: one object a line on stderr, with the current trace and span ids.
    log_format: Literal["text", "json"] = Field("text", validation_alias="WAYSTATION_LOG_FORMAT")

    @model_validator(mode="after")
    def _refuse_dev_secret_outside_dev(self) -> Settings:
        if self.env != "dev" and self.jwt_secret == DEV_JWT_SECRET:
            raise ValueError("WAYSTATION_JWT_SECRET must be set outside WAYSTATION_ENV=dev")
        if len(self.jwt_secret) < 32:
            raise ValueError("WAYSTATION_JWT_SECRET must be at least 32 characters")
        if self.env != "dev" and DEV_SECRETS_KEY in self.secrets_key:
            raise ValueError("WAYSTATION_SECRETS_KEY must be set outside WAYSTATION_ENV=dev "
                             "(`waystation secrets-key` prints a new key)")
        parse_keys(self.secrets_key)
        if self.jwks_url and not (self.jwt_audience and self.jwt_issuer):
            raise ValueError("WAYSTATION_JWKS_URL needs WAYSTATION_JWT_AUDIENCE and "
                             "WAYSTATION_JWT_ISSUER (tokens are checked against both)")
        if self.oidc_issuer and not self.oidc_client_id:
            raise ValueError("WAYSTATION_OIDC_ISSUER needs WAYSTATION_OIDC_CLIENT_ID")
        if self.slack_link_by != "command" and not self.users_named_by_email:
            # Else a Slack address would name whoever happens to be called that here.
            raise ValueError("WAYSTATION_SLACK_LINK_BY=email or both needs users named by the "
                             "identity provider's verified e-mail: WAYSTATION_OIDC_ISSUER with "
                             "WAYSTATION_OIDC_USER_CLAIM=email")
        return self

    @property
    def users_named_by_email(self) -> bool:
        """Whether Waystation's users are named by the identity provider's verified e-mail
        address (api/oidc.py refuses an address the provider has not verified)."""
        return self.oidc_issuer is not None and self.oidc_user_claim == "email"

    # Derived from the fields each time they are read, through caches keyed by the fields'
    # values, so a copy with other values (model_copy(update=...)) never sees the original's.
    @property
    def secrets_box(self) -> SecretsBox:
        return _secrets_box(self.secrets_key)

    @property
    def data_path(self) -> Path:
        return self.data_dir.expanduser()

    @property
    def plugin_modules(self) -> list[str]:
        return [m.strip() for m in self.plugins.split(",") if m.strip()]

    @property
    def cors_origin_list(self) -> list[str]:
        return [o.strip().rstrip("/") for o in self.cors_origins.split(",") if o.strip()]

    @property
    def allowed_host_list(self) -> list[str]:
        if self.allowed_hosts.strip():
            return _items(self.allowed_hosts)
        return [*LOOPBACK_HOSTS, urlsplit(self.console_base).netloc]

    @property
    def allowed_origin_list(self) -> list[str]:
        """The console's origin, WAYSTATION_ALLOWED_ORIGINS and WAYSTATION_CORS_ORIGINS: one
        list of the browser origins trusted to call the API."""
        console = urlsplit(self.console_base)
        return [f"{console.scheme}://{console.netloc}", *_items(self.allowed_origins),
                *self.cors_origin_list]

    @property
    def artifact_path(self) -> Path:
        return (self.artifact_dir or self.data_path / "artifacts").expanduser()

    def of(self, model: type[KindSettings]) -> KindSettings:
        """A run kind's own settings (`RunKind.settings`): as given in `kind_settings`, else
        read from the environment once for these settings (a start check asks on every
        `POST /runs`)."""
        for given in self.kind_settings:
            if isinstance(given, model):
                return given
        read = self._kinds_read.get(model)
        if read is None:
            read = self._kinds_read[model] = model()
        return read  # type: ignore[return-value]

    @property
    def temporal_ui_base(self) -> str:
        return (self.temporal_ui_url or f"http://127.0.0.1:{self.temporal_ui_port}").rstrip("/")

    @property
    def console_base(self) -> str:
        return (self.console_url or f"http://{self.api_host}:{self.api_port}").rstrip("/")

    @property
    def webhooks_to_private_networks(self) -> bool:
        if self.webhook_private_networks is not None:
            return self.webhook_private_networks
        return self.env == "dev"

    @property
    def console_cookie_is_secure(self) -> bool:
        if self.console_cookie_secure is not None:
            return self.console_cookie_secure
        return self.env != "dev"

    @property
    def embedded_pgdata(self) -> Path:
        return self.data_path / "pgdata"

    @property
    def temporal_db_file(self) -> Path:
        return self.data_path / "temporal.sqlite"


def _items(listed: str) -> list[str]:
    return [item.strip().rstrip("/") for item in listed.split(",") if item.strip()]


def load_settings() -> Settings:
    return Settings()


@lru_cache(maxsize=8)
def _secrets_box(keys: str) -> SecretsBox:
    return SecretsBox(keys)

