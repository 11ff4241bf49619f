"""The API's layers, read from the source: every interface calls the service layer, so no
route imports another route's module, the database or Temporal, the services know no
transport, and what Temporal answers is mapped to an API error in one place."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "api"


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
                  if m.startswith("waystation.api.routes.")
                  and m != f"waystation.api.routes.{path.stem}"}
        assert not routes, f"{path.name} imports {sorted(routes)}: call api/services instead"


def test_services_know_no_transport():
    for path in sorted((API / "services").glob("*.py")):
        transport = {m for m in imported_modules(path)
                     if m.split(".")[0] in ("fastapi", "starlette")
                     or m.startswith("waystation.api.routes") or m == "waystation.api.deps"}
        assert not transport, f"services/{path.name} imports {sorted(transport)}"


def test_protocols_call_services_not_routes():
    for path in sorted((API / "protocols").rglob("*.py")):
        routes = {m for m in imported_modules(path) if m.startswith("waystation.api.routes")}
        assert not routes, f"{path.relative_to(API)} imports {sorted(routes)}: call api/services"


def test_routes_reach_the_database_and_temporal_only_through_services():
    for path in sorted((API / "routes").glob("*.py")):
        below = {m for m in imported_modules(path)
                 if m.split(".")[0] == "temporalio" or m == "waystation.persistence"
                 or m.startswith("waystation.persistence.")}
        assert not below, f"routes/{path.name} imports {sorted(below)}: call api/services instead"


def rpc_error_handlers(path: Path) -> list[ast.ExceptHandler]:
    """The `except` clauses of `path` that catch temporalio's RPCError."""
    def names(node: ast.expr | None) -> set[str]:
        if node is None:
            return set()
        if isinstance(node, ast.Tuple):
            return {n for element in node.elts for n in names(element)}
        return {node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")}
    return [node for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.ExceptHandler) and "RPCError" in names(node.type)]


def test_every_temporal_refusal_is_mapped_by_the_one_function():
    """A caught RPCError becomes an API error through `workflow_updates.temporal_refusal`
    (whatever it leaves is re-raised for `waystation.api.errors.as_api_error`), not by a status
    test of its own."""
    handlers = {path: rpc_error_handlers(path)
                for folder in (API, ROOT / "kinds") for path in sorted(folder.rglob("*.py"))}
    assert handlers[API / "services" / "workflow_updates.py"], "the mapping found no handler"
    for path, found in handlers.items():
        for handler in found:
            called = {node.func.id for node in ast.walk(handler)
                      if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
            assert "temporal_refusal" in called, (
                f"{path.relative_to(ROOT)}:{handler.lineno} maps an RPCError itself: "
                "use waystation.api.services.workflow_updates.temporal_refusal")
