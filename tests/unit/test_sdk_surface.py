"""`waystation.sdk` is the one door: every module of `kinds/` (the built-in kinds) and of
`examples/` (the plug-ins, their tests included) imports from Waystation only through it, and
each thing there has one address under its own name, so a built-in kind and a plug-in use the
same name for the same thing (issue 40). A kind may import itself, another kind and
third-party packages."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import waystation.sdk

ROOT = Path(__file__).resolve().parents[2]
SDK = "waystation.sdk"
# The built-in kinds are installed under Waystation's name too: a kind may import a kind.
KINDS_PACKAGE = "waystation.kinds"
# The example plug-in: a kind written outside the repository's packages, as a team would.
PLUGIN = ROOT / "examples" / "content_review"


@dataclass(frozen=True)
class Imported:
    where: str  # file:line
    module: str  # the module imported from
    name: str  # the name imported, or "" for `import module`
    alias: str | None


def imports_in(folder: Path) -> list[Imported]:
    found = []
    base = ROOT if folder.is_relative_to(ROOT) else folder
    for path in sorted(folder.rglob("*.py")):
        if "node_modules" in path.parts or ".venv" in path.parts:
            continue
        where = path.relative_to(base)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found += [Imported(f"{where}:{node.lineno}", node.module, a.name, a.asname)
                          for a in node.names]
            elif isinstance(node, ast.Import):
                found += [Imported(f"{where}:{node.lineno}", a.name, "", a.asname)
                          for a in node.names]
    return found


def waystations(imports: list[Imported]) -> list[Imported]:
    """The imports of Waystation's core (its SDK included), not of a kind."""
    return [i for i in imports if i.module.split(".")[0] == "waystation" and not in_kinds(i.module)]


def in_kinds(module: str) -> bool:
    return module == KINDS_PACKAGE or module.startswith(KINDS_PACKAGE + ".")


def in_sdk(module: str) -> bool:
    return module == SDK or module.startswith(SDK + ".")


KINDS = imports_in(ROOT / "kinds")
EXAMPLES = imports_in(ROOT / "examples")


def sdk_modules() -> list[ModuleType]:
    names = [SDK] + [f"{SDK}.{m.name}" for m in pkgutil.iter_modules(waystation.sdk.__path__)]
    return [importlib.import_module(n) for n in names]


def addresses() -> dict[int, list[str]]:
    """Each object the SDK exports, by identity: the `module.name`s it is exported under."""
    found: dict[int, list[str]] = defaultdict(list)
    for module in sdk_modules():
        for name in module.__all__:
            value = getattr(module, name)
            # A string or a number is compared by value: two codes may be equal by chance.
            if not isinstance(value, str | int | float):
                found[id(value)].append(f"{module.__name__}.{name}")
    return found


def test_the_scan_sees_the_kinds_and_the_plugins_imports() -> None:
    # Guards the guard: an import of the SDK in each kind and in the example plug-in.
    for folder in ("kinds/agent", "kinds/batch", "kinds/mobile", "kinds/validation",
                   "examples/content_review"):
        assert any(i.where.startswith(folder) and in_sdk(i.module) for i in KINDS + EXAMPLES), \
            folder


def test_kinds_and_examples_import_waystation_only_through_the_sdk() -> None:
    beside = [f"{i.where}: {i.module}" for i in waystations(KINDS + EXAMPLES)
              if not in_sdk(i.module)]
    assert beside == [], "import these through waystation.sdk:\n" + "\n".join(beside)


def test_the_scan_catches_a_core_import(tmp_path: Path) -> None:
    (tmp_path / "kind.py").write_text(
        "from waystation.sdk import RunKind\n"
        "def later():\n    from waystation.api.deps import Conn\n"
        "    import waystation.persistence.db\n")
    imports = imports_in(tmp_path)
    assert [i.module for i in waystations(imports) if not in_sdk(i.module)] == [
        "waystation.api.deps", "waystation.persistence.db"]


def test_every_name_taken_from_the_sdk_is_exported_there() -> None:
    # Not an incidental import of one of its modules: what is not in `__all__` is not the SDK.
    stray = []
    for i in waystations(KINDS + EXAMPLES):
        module = importlib.import_module(i.module)
        exported = getattr(module, "__all__", None)
        if i.name == "" or exported is None or i.name not in exported:
            stray.append(f"{i.where}: {i.module} {i.name or '(module)'}")
    assert stray == [], "not exported by the SDK:\n" + "\n".join(stray)


def test_each_thing_in_the_sdk_has_one_address_under_its_own_name() -> None:
    twice = {id_: where for id_, where in addresses().items() if len(where) > 1}
    assert twice == {}, "exported more than once: " + str(list(twice.values()))
    renamed = []
    for module in sdk_modules():
        for name in module.__all__:
            value = getattr(module, name)
            own = value.__name__.rsplit(".", 1)[-1] if (
                inspect.isclass(value) or inspect.isfunction(value)
                or inspect.ismodule(value)) else name
            if own != name:
                renamed.append(f"{module.__name__}.{name} is {own}")
    assert renamed == [], renamed


def test_built_in_kinds_and_the_plugin_use_the_same_names_for_the_same_things() -> None:
    # One address per object (above) makes a name the same everywhere, unless a module renames
    # what it imports: only a module may be aliased (`search_attributes as sa`).
    aliased = [f"{i.where}: {i.name} as {i.alias}" for i in waystations(KINDS + EXAMPLES)
               if i.alias and i.name and not inspect.ismodule(
                   getattr(importlib.import_module(i.module), i.name))]
    assert aliased == [], aliased
    # So what the example plug-in and a built-in kind both use, they take from one module.
    modules: dict[str, set[str]] = defaultdict(set)
    for i in waystations(KINDS) + waystations(imports_in(PLUGIN)):
        modules[i.name].add(i.module)
    shared = {i.name for i in waystations(imports_in(PLUGIN))} & {
        i.name for i in waystations(KINDS)}
    assert {"RunKind", "RunWorkflow", "GateSpec", "GateOption", "WorkerDeps"} <= shared
    assert {n: sorted(modules[n]) for n in shared if len(modules[n]) > 1} == {}


def test_the_sdk_imports_no_kind() -> None:
    # Kinds import the SDK; the SDK importing a kind would be a cycle, and the core naming one.
    for module in sdk_modules():
        source = Path(inspect.getfile(module)).read_text()
        assert not any(in_kinds(i.module) for i in imports_in_source(source)), module.__name__


def imports_in_source(source: str) -> list[Imported]:
    return [Imported("", n.module, a.name, a.asname) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.ImportFrom) and n.module for a in n.names]


async def test_the_sdks_workflow_side_imports_in_temporals_sandbox() -> None:
    # The sandbox re-imports a workflow's module and what it imports at its top, and refuses
    # the worker's and the API's side (model clients, FastAPI): the SDK passes its imports
    # through, so a plug-in may import it anywhere in its workflow's modules.
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from tests.plugin_samples.sdk_at_top_level import SdkAtTopLevel
    from waystation.workflows.definitions import WorkflowDefinition

    SandboxedWorkflowRunner().prepare_workflow(WorkflowDefinition.must_from_class(SdkAtTopLevel))


def test_the_sandbox_sample_imports_every_module_of_the_sdk() -> None:
    sample = Path(inspect.getfile(importlib.import_module("tests.plugin_samples.sdk_at_top_level")))
    imported = {i.module for i in imports_in_source(sample.read_text())} | {
        a.name for n in ast.walk(ast.parse(sample.read_text())) if isinstance(n, ast.Import)
        for a in n.names}
    assert {m.__name__ for m in sdk_modules()} <= imported


def test_no_built_in_kind_imports_another() -> None:
    # Each kind moves out into its own distribution alone (a plug-in's agent may import the
    # `agent` kind's authoring surface: that is the kind it registers for). `kinds/__init__.py`,
    # the list of the built-in kinds, names them all.
    crossing = [f"{i.where}: {i.module}" for i in KINDS
                if in_kinds(i.module) and not i.where.startswith("kinds/__init__")
                and i.where.split("/")[1] != i.module.split(".")[2]]
    assert crossing == [], crossing
