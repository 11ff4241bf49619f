"""Security headers on every answer, a CSP on HTML, and an OpenAPI schema that declares its
bearer scheme and stable operation ids."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest_asyncio
from fastapi.routing import APIRoute

from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.settings import Settings

SECRET = "hardening-secret-0123456789-0123456789-ab"


@pytest_asyncio.fixture
async def http(migrated_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(database_url=migrated_url, jwt_secret=SECRET,
                              temporal_address="127.0.0.1:1"))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://localhost") as client:
            yield client


def _assert_security_headers(response: httpx.Response) -> None:
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert "max-age=" in response.headers["strict-transport-security"]


async def test_every_answer_carries_security_headers_and_html_a_csp(http):
    token = {"Authorization": f"Bearer {issue_token(SECRET, 'hardening')}"}
    answers = [
        await http.get("/livez"),
        await http.get("/runs", headers=token),
        await http.get("/runs"),  # 401
        await http.get("/no/such/route"),  # 404
        await http.post("/runs", headers=token, content=b"x" * 300_000,  # 413 from BodyLimits
                        ),
        await http.get("/apps/com.example.none/graph", params={"format": "html"},
                       headers=token),  # 404, JSON
        await http.get("/docs"),
        await http.get("/redoc"),
    ]
    assert [a.status_code for a in answers] == [200, 200, 401, 404, 413, 404, 200, 200]
    for answer in answers:
        _assert_security_headers(answer)
        is_html = answer.headers["content-type"].startswith("text/html")
        assert ("content-security-policy" in answer.headers) == is_html, answer.request.url
    for docs in answers[6:]:
        csp = docs.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert "script-src 'unsafe-inline' https://cdn.jsdelivr.net" in csp



async def test_openapi_declares_bearer_and_operation_ids_are_function_names(http):
    schema = (await http.get("/openapi.json")).json()
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
        "description": schema["components"]["securitySchemes"]["bearer"]["description"]}
    operations = {(path, method.upper()): op for path, methods in schema["paths"].items()
                  for method, op in methods.items()}
    ids = [op["operationId"] for op in operations.values()]
    assert len(ids) == len(set(ids)), sorted(ids)
    checked = 0
    for route in http._transport.app.state.routes:  # type: ignore[attr-defined]
        if isinstance(route, APIRoute) and route.include_in_schema:
            for method in route.methods:
                assert operations[(route.path, method)]["operationId"] == route.name
                checked += 1
    assert checked == len(operations)
    assert operations[("/runs", "POST")]["operationId"] == "create_run"
    assert operations[("/runs", "POST")]["security"] == [{"bearer": []}]
    assert "security" not in operations[("/livez", "GET")]
