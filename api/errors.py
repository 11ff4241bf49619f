"""One JSON shape for every error: {"error": {"code", "message", "details"?}}.

Temporal being unreachable is a 503 with Retry-After, never a 500; a validation problem is a
422 naming the field.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.service import RPCError, RPCStatusCode

from waystation.persistence.db import UNAVAILABLE_ERRORS

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = "5"
_UNAVAILABLE = {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED,
                RPCStatusCode.CANCELLED, RPCStatusCode.RESOURCE_EXHAUSTED}


class ErrorInfo(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorBody(BaseModel):
    """The one shape of every error answer."""

    error: ErrorInfo


def _error(description: str, **extra: Any) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description, **extra}


# Documented on every route (OpenAPI), so clients and schema-driven tests know the error shape.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _error("Missing, malformed, expired or wrongly signed bearer token (or console "
                "session)"),
    403: _error("Not allowed: a change authenticated by a console session cookie without the "
                "session's X-CSRF-Token header; a group role that may not do this (the message "
                "names the rule); a decision link that is invalid, used or expired; an "
                "operator route without the service role; a device the caller may not name"),
    404: _error("No such run, job, item, checkpoint or app (another user's run included)"),
    409: _error("Conflicts with the current state: not pending, finished, stale, or an "
                "Idempotency-Key reused for a different request"),
    413: _error("Request body too large"),
    415: _error("Request body is not application/json"),
    421: _error("The Host header names a host this server does not answer to "
                "(WAYSTATION_ALLOWED_HOSTS)"),
    422: _error("Invalid request; `details` names each field"),
    429: _error("Too many open streams or writes for this user; retry after Retry-After "
                "seconds", headers={"Retry-After": {"description": "Seconds to wait before "
                                                   "retrying", "schema": {"type": "integer"}}}),
    503: _error("Temporal or the database is unavailable; retry after Retry-After seconds",
                headers={"Retry-After": {"description": "Seconds to wait before retrying",
                                         "schema": {"type": "integer"}}}),
}

# Answers only a request that may carry a body (POST) can get.
BODY_ONLY_ERRORS = (403, 409, 413, 415)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, *,
                 details: Any = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.details, self.headers = details, headers


def invalid_field(loc: list[str | int], msg: str, type_: str) -> ApiError:
    """A 422 naming the field at `loc` (as FastAPI's own validation errors do), e.g.
    `["query", "at_step"]` or `["body", "item_ids", 2]`."""
    where = ".".join(str(part) for part in loc)
    return ApiError(422, "invalid_request", f"{where}: {msg}",
                    details=[{"loc": loc, "msg": msg, "type": type_}])


def unavailable(message: str) -> ApiError:
    return ApiError(503, "unavailable", message, headers={"Retry-After": RETRY_AFTER_SECONDS})


def as_api_error(error: Exception) -> ApiError | None:
    """What an error that escaped a service means to any transport: Temporal or the database
    unreachable is a 503, any other Temporal refusal a 502; None for a bug (a 500, logged by
    the caller). REST's handlers and the protocol adapters all map through here."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, RPCError):
        if error.status in _UNAVAILABLE:
            return unavailable("Temporal is unavailable; retry shortly")
        return ApiError(502, "temporal_error", f"Temporal refused the request: {error.message}")
    if isinstance(error, UNAVAILABLE_ERRORS):
        # The database went away in the middle of the request (restart, failover).
        return unavailable("the database is unavailable; retry shortly")
    return None


def escaped_error(error: Exception, where: str) -> ApiError:
    """`as_api_error` with a bug answered as a 500, and what needs looking at logged (`where`
    names the request): what REST and a protocol adapter answer for an error that escaped."""
    mapped = as_api_error(error)
    if mapped is None:
        log.error("unhandled error on %s", where, exc_info=error)
        return ApiError(500, "internal_error", "internal error")
    if mapped.status == 502:
        log.error("unexpected Temporal error on %s", where, exc_info=error)
    elif mapped.status == 503:
        log.warning("unavailable on %s: %s", where, error)
    return mapped


def invalid_request(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """The 422 for arguments that fail their model (pydantic's `errors()`), naming the first
    invalid field, or the registered kinds for an unknown `kind`: a route's body and a
    protocol tool's arguments are refused alike."""
    details = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""),
                "type": e.get("type", "")} for e in errors]
    first = details[0] if details else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"])
    message = f"{where}: {first['msg']}"
    for e in errors:
        ctx = e.get("ctx") or {}
        if e.get("type") == "union_tag_invalid" and ctx.get("discriminator") == "'kind'":
            known = str(ctx.get("expected_tags", "")).replace("'", "")
            message = f"kind: unknown run kind {ctx.get('tag')!r}; one of {known}"
    return ApiError(422, "invalid_request", message, details=details)


def error_response(status: int, code: str, message: str, *, details: Any = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, error: ApiError) -> JSONResponse:
        return error_response(error.status, error.code, error.message, details=error.details,
                              headers=error.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return await _api_error(request, invalid_request(error.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        return error_response(error.status_code, code, str(error.detail),
                              headers=getattr(error, "headers", None))

    @app.exception_handler(RPCError)
    @app.exception_handler(Exception)
    async def _escaped(request: Request, error: Exception) -> JSONResponse:
        return await _api_error(request, escaped_error(
            error, f"{request.method} {request.url.path}"))
