"""One JSON shape for every error: {"error": {"code", "message", "details"?}}.

Temporal being unreachable is a 503 with Retry-After, never a 500; a validation problem is a
422 naming the field.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.service import RPCError, RPCStatusCode

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = "5"
_UNAVAILABLE = {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED,
                RPCStatusCode.CANCELLED, RPCStatusCode.RESOURCE_EXHAUSTED}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, *,
                 details: Any = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.details, self.headers = details, headers


def unavailable(message: str) -> ApiError:
    return ApiError(503, "unavailable", message, headers={"Retry-After": RETRY_AFTER_SECONDS})


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
        details = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""),
                    "type": e.get("type", "")} for e in error.errors()]
        first = details[0] if details else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"])
        return error_response(422, "invalid_request", f"{where}: {first['msg']}",
                              details=details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        return error_response(error.status_code, code, str(error.detail),
                              headers=getattr(error, "headers", None))

    @app.exception_handler(RPCError)
    async def _temporal(request: Request, error: RPCError) -> JSONResponse:
        if error.status in _UNAVAILABLE:
            return error_response(503, "unavailable", "Temporal is unavailable; retry shortly",
                                  headers={"Retry-After": RETRY_AFTER_SECONDS})
        log.exception("unexpected Temporal error")
        return error_response(502, "temporal_error", f"Temporal refused the request: "
                                                     f"{error.message}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "internal error")
