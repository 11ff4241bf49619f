"""The API's layers, read from the source: every interface calls the service layer, so no
route imports another route's module, and the services know no transport."""

from __future__ import annotations

import ast
from pathlib import Path

API = Path(__file__).resolve().parents[2] / "api"


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, `from a import b` counted as both `a` and `a.b` (b may
    be a module)."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def test_no_route_imports_another_route():
    for path in sorted((API / "routes").glob("*.py")):
        routes = {m for m in imported_modules(path)
                  if m.startswith("api.routes.") and m != f"api.routes.{path.stem}"}
        assert not routes, f"{path.name} imports {sorted(routes)}: call api/services instead"


def test_services_know_no_transport():
    for path in sorted((API / "services").glob("*.py")):
        transport = {m for m in imported_modules(path)
                     if m.split(".")[0] in ("fastapi", "starlette") or m.startswith("api.routes")
                     or m == "api.deps"}
        assert not transport, f"services/{path.name} imports {sorted(transport)}"


def test_protocols_call_services_not_routes():
    for path in sorted((API / "protocols").rglob("*.py")):
        routes = {m for m in imported_modules(path) if m.startswith("api.routes")}
        assert not routes, f"{path.relative_to(API)} imports {sorted(routes)}: call api/services"
