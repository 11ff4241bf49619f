"""Strict, sandboxed prompt templates for pipeline steps (seed 002's bug, made impossible).

Templates come from users, so they render in Jinja2's sandbox, and with `StrictUndefined`: a
reference to a missing item field or step output raises an error that names the reference
(`outputs.summarize`), so a literal placeholder can never reach an agent. Everything that can
be checked without an item is checked when the job is submitted: syntax, the names a template
may use (`item`, `outputs`), and that every `outputs.X` names an earlier step.

Templates also run on a budget (issue 25): one render may turn its loops `MAX_LOOP_TURNS`
times, produce `MAX_OUTPUT_CHARS` and take `RENDER_SECONDS`; past any of these the item fails
with `OverBudget`. Every loop's iterable is wrapped (at compile time) in a counter that checks
the budget, and `*`/`**` are intercepted so one expression cannot build a huge value. These
checks run inside the render, between Python steps; a single call such as
`"x"|center(10 ** 9)` or printing a list nested on itself is out of their reach, so the worker
renders in a render process whose memory is capped and which it kills past the time budget
(render_process.py). Loops nested deeper than `MAX_LOOP_NESTING`, recursive loops (whose
inner turns bypass the counter), and loops over values written in the template that would
turn past `MAX_LOOP_TURNS` are refused at submit.

A step's output is its answer's text (`{{ outputs.summarize }}`, `'poor' in output`), whose
parsed fields read as attributes (`outputs.grade.score`); `| tojson` gives the fields as JSON
(or the text as a JSON string when the answer had none).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, nodes
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

ALLOWED_NAMES = frozenset({"item", "outputs"})
# Branch conditions may also look at the step's own output.
BRANCH_NAMES = ALLOWED_NAMES | {"output"}


MAX_LOOP_TURNS = 100_000
MAX_OUTPUT_CHARS = 1_000_000
RENDER_SECONDS = 2.0
MAX_LOOP_NESTING = 2
# `2 ** 4096` is already beyond any prompt's use; a bigger exponent only costs CPU.
MAX_EXPONENT = 4096


class TemplateProblem(ValueError):
    """A template that cannot be used (submit time) or rendered for an item (run time)."""


class OverBudget(TemplateProblem):
    """A render that would loop, grow or run past its budget."""


class _Budget:
    def __init__(self) -> None:
        self.turns = 0
        self.deadline = time.monotonic() + RENDER_SECONDS

    def spend_turn(self) -> None:
        self.turns += 1
        if self.turns > MAX_LOOP_TURNS:
            raise OverBudget(f"template over budget: more than {MAX_LOOP_TURNS} loop turns")
        self.check_time()

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise OverBudget(f"template over budget: rendering took over {RENDER_SECONDS} s")


# The budget of the render running in this thread (each render sets its own).
_budget: ContextVar[_Budget] = ContextVar("template_budget")
_COUNTED = "waystation_counted"


class Scope(dict):
    """A dict that knows its dotted path, so a missing key is reported as `item.text`."""

    def __init__(self, path: str, values: Mapping[str, Any]) -> None:
        super().__init__({k: _wrap(f"{path}.{k}", v) for k, v in values.items()})
        self.path = path


def _wrap(path: str, value: Any) -> Any:
    return Scope(path, value) if isinstance(value, Mapping) else value


class StepText(str):
    """A step's output: its text, with the answer's fields as attributes and items."""

    path: str
    fields: Scope

    @classmethod
    def of(cls, path: str, stored: Any) -> StepText:
        """From what item_outputs holds: {"text", "fields"}, or an older bare object."""
        if isinstance(stored, Mapping) and set(stored) == {"text", "fields"}:
            text, fields = stored["text"], stored["fields"] or {}
        elif isinstance(stored, Mapping):
            given = stored.get("text")
            text, fields = (given if isinstance(given, str) else json.dumps(stored)), stored
        else:
            text, fields = str(stored), {}
        made = cls(text)
        made.path, made.fields = path, Scope(path, fields)
        return made

    @property
    def text(self) -> str:
        return str(self)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self.fields:
            raise AttributeError(name)
        return self.fields[name]

    def __getitem__(self, key: Any) -> Any:
        return self.fields[key] if isinstance(key, str) else str.__getitem__(self, key)


def _plain(value: Any) -> Any:
    if isinstance(value, StepText):
        return _plain(dict(value.fields)) if value.fields else str(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(_plain(value), **kwargs)


class _NamedUndefined(StrictUndefined):
    """StrictUndefined whose message names the full reference, e.g. `outputs.grade`."""

    def _fail_with_undefined_error(self, *args: Any, **kwargs: Any) -> Any:
        owner = self._undefined_obj
        if isinstance(owner, Scope | StepText):
            raise UndefinedError(f"{owner.path}.{self._undefined_name} is undefined")
        if self._undefined_hint is None and self._undefined_name is not None:
            raise UndefinedError(f"{self._undefined_name} is undefined")
        return super()._fail_with_undefined_error(*args, **kwargs)

    # Every use of an undefined value fails, including printing and truth tests.
    __str__ = __bool__ = __iter__ = __len__ = _fail_with_undefined_error


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    budget = _budget.get()
    for value in iterable:
        budget.spend_turn()
        yield value


def _sized(length: int, times: Any) -> None:
    if isinstance(times, int) and length * times > MAX_OUTPUT_CHARS:
        raise OverBudget(f"template over budget: a value over {MAX_OUTPUT_CHARS} characters")


class _BudgetedEnvironment(SandboxedEnvironment):
    """The sandbox, with `*` and `**` checked before they build a value."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if isinstance(sequence, str | list | tuple):
                    _sized(len(sequence), times)
        elif isinstance(right, int) and abs(right) > MAX_EXPONENT:
            raise OverBudget(f"template over budget: an exponent over {MAX_EXPONENT}")
        return super().call_binop(context, operator, left, right)


_ENV = _BudgetedEnvironment(undefined=_NamedUndefined, autoescape=False,
                            keep_trailing_newline=True)
_ENV.policies["json.dumps_function"] = _dumps
_ENV.filters[_COUNTED] = _counted


@lru_cache(maxsize=512)
def _compiled(source: str) -> Any:
    tree = _ENV.parse(source)
    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Filter(loop.iter, _COUNTED, [], [], None, None, lineno=loop.lineno)
    return _ENV.from_string(tree)


@lru_cache(maxsize=512)
def _compiled_expression(source: str) -> Any:
    return _ENV.compile_expression(source, undefined_to_none=False)


def _context(item: Mapping[str, Any], outputs: Mapping[str, Any],
             output: Any = None) -> dict[str, Any]:
    texts = {step: StepText.of(f"outputs.{step}", stored) for step, stored in outputs.items()}
    context: dict[str, Any] = {"item": Scope("item", item), "outputs": Scope("outputs", texts)}
    if output is not None:
        context["output"] = StepText.of("output", output)
    return context


def render(source: str, item: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
    """Render a step's prompt within its budget; TemplateProblem names whatever was missing
    (or which budget ran out). CPU-bound: the worker calls it in a thread."""
    _budget.set(budget := _Budget())
    rendered: list[str] = []
    length = 0
    try:
        for chunk in _compiled(source).generate(_context(item, outputs)):
            length += len(chunk)
            if length > MAX_OUTPUT_CHARS:
                raise OverBudget(f"template over budget: output over {MAX_OUTPUT_CHARS} "
                                 f"characters")
            budget.check_time()
            rendered.append(chunk)
    except (UndefinedError, SecurityError, TypeError) as error:
        raise TemplateProblem(str(error)) from error
    return "".join(rendered)


def evaluate(condition: str, item: Mapping[str, Any], outputs: Mapping[str, Any],
             output: Any) -> bool:
    """A branch condition's truth for this item and output (an expression has no loops; its
    `*` and `**` are bounded as in a template)."""
    _budget.set(_Budget())
    try:
        return bool(_compiled_expression(condition)(**_context(item, outputs, output)))
    except (UndefinedError, SecurityError, TypeError) as error:
        raise TemplateProblem(str(error)) from error


# --- submit-time checks ----------------------------------------------------------------------

# Parsing and walking a template recurse once per level of brackets or operators.
_TOO_DEEP = "expressions nested too deeply"


def check_template(source: str, *, earlier_steps: list[str], all_steps: list[str]) -> None:
    """Refuse a template that could never render correctly; the message names the problem."""
    try:
        tree = _ENV.parse(source)
        _check_names(tree, ALLOWED_NAMES, earlier_steps, all_steps)
        _check_loops(tree)
    except TemplateSyntaxError as error:
        raise TemplateProblem(f"syntax error on line {error.lineno}: {error.message}") from error
    except RecursionError:
        raise TemplateProblem(_TOO_DEEP) from None


def check_condition(source: str, *, earlier_steps: list[str], all_steps: list[str]) -> None:
    try:
        tree = _ENV.parse(f"{{{{ {source} }}}}")
        _check_names(tree, BRANCH_NAMES, earlier_steps, all_steps)
    except TemplateSyntaxError as error:
        raise TemplateProblem(f"syntax error in condition: {error.message}") from error
    except RecursionError:
        raise TemplateProblem(_TOO_DEEP) from None


def _check_names(tree: nodes.Template, allowed: frozenset[str], earlier: list[str],
                 all_steps: list[str]) -> None:
    # Names a template assigns itself ({% set %}, loop variables) are its own business.
    assigned = {n.name for n in tree.find_all(nodes.Name) if n.ctx in ("store", "param")}
    for name in tree.find_all(nodes.Name):
        if name.ctx == "load" and name.name not in allowed | assigned:
            raise TemplateProblem(
                f"unknown name {name.name!r}; a template may use {', '.join(sorted(allowed))}")
    for step in _referenced_outputs(tree):
        if step not in all_steps:
            raise TemplateProblem(f"outputs.{step} refers to no step of this job")
        if step not in earlier:
            raise TemplateProblem(f"outputs.{step} is not an earlier step's output")


def _check_loops(tree: nodes.Node, depth: int = 0, turns: int | None = 1) -> None:
    """Refuse recursive loops, loops nested too deep, and loops over values written in the
    template (`"x" * 20000`) that would turn past MAX_LOOP_TURNS: `turns` is how often the
    enclosing loops certainly turn (None once one of them runs over data)."""
    for loop in tree.iter_child_nodes():
        inner, inner_turns = depth, turns
        if isinstance(loop, nodes.For):
            if loop.recursive:
                raise TemplateProblem(f"line {loop.lineno}: recursive loops are not allowed")
            inner = depth + 1
            if inner > MAX_LOOP_NESTING:
                raise TemplateProblem(f"line {loop.lineno}: loops nested over "
                                      f"{MAX_LOOP_NESTING} deep")
            length = _written_length(loop.iter)
            inner_turns = None if turns is None or length is None else turns * length
            if inner_turns is not None and inner_turns > MAX_LOOP_TURNS:
                raise TemplateProblem(
                    f"line {loop.lineno}: loops over values written in the template would "
                    f"turn {inner_turns} times, over the budget of {MAX_LOOP_TURNS}")
        _check_loops(loop, inner, inner_turns)


def _written_length(node: nodes.Node) -> int | None:
    """The length of a value written in the template (a literal, literals joined or
    multiplied), found without evaluating anything; None when it depends on data."""
    if isinstance(node, nodes.Const):
        value = node.value
        return len(value) if isinstance(value, str | list | tuple | dict) else None
    if isinstance(node, nodes.List | nodes.Tuple | nodes.Dict):
        return len(node.items)
    if isinstance(node, nodes.Add):
        left, right = _written_length(node.left), _written_length(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, nodes.Mul):
        for sequence, times in ((node.left, node.right), (node.right, node.left)):
            length = _written_length(sequence)
            if length is not None and isinstance(times, nodes.Const) and isinstance(
                    times.value, int) and not isinstance(times.value, bool):
                return length * max(times.value, 0)
    return None


def _referenced_outputs(tree: nodes.Template) -> list[str]:
    found = []
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        assert isinstance(node, nodes.Getattr | nodes.Getitem)
        target = node.node
        if not (isinstance(target, nodes.Name) and target.name == "outputs"):
            continue
        if isinstance(node, nodes.Getattr):
            found.append(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            found.append(node.arg.value)
    return found
