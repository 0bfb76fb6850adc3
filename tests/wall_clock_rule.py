"""The suite's timing rule, read from the tests' source: no test of the default suite asserts
a wall-clock bound.

A machine that other processes keep busy runs everything later, so a bound on how long
something took (``assert elapsed < 0.1``) fails there while the code is right. A test of the
default suite asserts counts, CPU time (``time.process_time``, a thread's or a process's
CPU), or the order of events instead; a timing that matters goes to a set outside it (the
``slow``, ``cluster`` or ``rocketmq`` marker) or to a benchmark in ``bench/``. The one kind
of wall-clock assertion a loaded machine cannot break is a lower bound (a deadline was
honoured *at least* this long: load only makes it later), and such a line says so with a
comment::

    assert waited >= 0.5  # wall-clock: a lower bound (the hold lasted its max_wait)

`violations` reads each module's AST: a value is *timed* when it comes from a clock
(`CLOCKS`), from arithmetic on a timed value, or from a function of the same module that
returns one; an ``assert`` that orders a timed value against one that is not (a constant,
a timeout), or compares it with ``pytest.approx``, is a wall-clock bound. Tests under
trio's ``MockClock`` (the ``autojump_clock`` / ``mock_clock`` fixtures) are exempt: their
time is virtual.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# Calls that read a wall clock (by their dotted name, or their last part when imported bare).
CLOCKS: Final = frozenset({
    "time.monotonic", "time.monotonic_ns", "time.perf_counter", "time.perf_counter_ns",
    "time.time", "time.time_ns", "trio.current_time", "monotonic", "perf_counter",
    "current_time", "datetime.now", "datetime.datetime.now",
})
# Markers whose tests are outside the default suite (Makefile: ``-m "not slow and not cluster
# and not rocketmq"``).
OUTSIDE_DEFAULT: Final = frozenset({"slow", "cluster", "rocketmq"})
# Fixtures under which trio's clock is virtual.
VIRTUAL_CLOCK_FIXTURES: Final = frozenset({"autojump_clock", "mock_clock"})
# The comment that marks an allowed line, and what must follow it.
ALLOW: Final = "# wall-clock:"
ORDERING: Final = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
CLOCK_NAMES: Final = frozenset({"current_time", "monotonic", "perf_counter", "monotonic_ns",
                                "perf_counter_ns"})

# Names (variables, attributes, keys) that hold a duration or a time (``stamp``) measured
# elsewhere.
DURATION: Final = re.compile(r"^(elapsed|seconds|took|duration|waited|latency|wall|stamp)$"
                             r"|_(elapsed|took|duration|waited)$")
# Calls whose result is timed when an argument is (arithmetic on durations).
PASS_THROUGH: Final = frozenset({"abs", "min", "max", "sum", "round", "float", "int", "sorted",
                                 "median", "mean", "fmean", "total_seconds"})
ALL: Final = -1  # a function whose whole result is timed

@dataclass(frozen=True, slots=True)
class Finding:
    """One assertion of a wall-clock bound: where, and whether it bounds from above."""

    path: Path
    line: int
    text: str
    upper: bool
    allowed: str | None  # the reason given on the line, if any

    def __str__(self) -> str:
        kind = "an upper bound" if self.upper else "a lower bound"
        return f"{self.path}:{self.line}: {kind}: {self.text.strip()}"


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    if isinstance(node, ast.Call):  # trio.lowlevel.current_clock().current_time
        return _dotted(node.func)
    return ""


def _marks(decorators: list[ast.expr]) -> set[str]:
    """Marker names among ``decorators`` (``@pytest.mark.slow``, ``@pytest.mark.slow(...)``)."""
    found = set()
    for node in decorators:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and _dotted(sub.value).endswith("mark"):
                found.add(sub.attr)
    return found


def _module_marks(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return _marks([node.value])
    return set()




class _Timed:
    """Which names of a function, and which results of the module's functions, are timed."""

    def __init__(self, tree: ast.Module) -> None:
        # function name -> positions of its returned tuple that are timed (ALL: the result)
        self.functions: dict[str, set[int]] = {}
        self._bindings: dict[ast.AST, list[tuple[ast.expr, ast.expr]]] = {}
        # each function, and the values it returns (nested functions' too)
        functions = [(n, [r.value for r in ast.walk(n)
                          if isinstance(r, ast.Return) and r.value is not None])
                     for n in ast.walk(tree)
                     if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        changed = True
        while changed:  # a helper returning a helper's duration is timed too
            changed = False
            for fn, returned in functions:
                if not returned:
                    continue
                names = self.names_of(fn)
                positions: set[int] = set()
                for value in returned:
                    if isinstance(value, ast.Tuple):
                        positions |= {i for i, elt in enumerate(value.elts)
                                      if self.is_timed(elt, names)}
                    elif self.is_timed(value, names):
                        positions.add(ALL)
                if positions - self.functions.get(fn.name, set()):
                    self.functions.setdefault(fn.name, set()).update(positions)
                    changed = True

    def is_timed(self, node: ast.expr, names: set[str]) -> bool:
        """Whether ``node``'s value is a time read from a clock, or computed from one."""
        match node:
            case ast.Name(id=name):
                return name in names or bool(DURATION.search(name))
            case ast.Constant():
                return False
            case ast.Call(func=func, args=args):
                called = _dotted(func)
                last = called.rsplit(".", 1)[-1]
                if called in CLOCKS or last in CLOCK_NAMES:
                    return True
                if ALL in self.functions.get(last, ()):
                    return True
                if last in PASS_THROUGH:
                    return any(self.is_timed(a, names) for a in args) or (
                        isinstance(func, ast.Attribute) and self.is_timed(func.value, names))
                return False
            case ast.BinOp(left=left, right=right):
                return self.is_timed(left, names) or self.is_timed(right, names)
            case ast.UnaryOp(operand=operand):
                return self.is_timed(operand, names)
            case ast.Attribute(value=value, attr=attr):
                return bool(DURATION.search(attr)) or self.is_timed(value, names)
            case ast.Subscript(value=value, slice=key):
                return (isinstance(key, ast.Constant) and isinstance(key.value, str)
                        and bool(DURATION.search(key.value))) or self.is_timed(value, names)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                return any(self.is_timed(e, names) for e in elts)
            case ast.GeneratorExp(elt=elt) | ast.ListComp(elt=elt) | ast.SetComp(elt=elt):
                return self.is_timed(elt, names)
            case ast.IfExp(body=body, orelse=orelse):
                return self.is_timed(body, names) or self.is_timed(orelse, names)
            case ast.Await(value=value):
                return self.is_timed(value, names)
        return False

    def _bind(self, target: ast.expr, value: ast.expr, names: set[str]) -> bool:
        """Add the names ``target`` binds to timed parts of ``value``; return whether any
        was new."""
        pairs: list[tuple[ast.expr, bool]] = []
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) \
                and len(target.elts) == len(value.elts):
            pairs = [(t, self.is_timed(v, names)) for t, v in zip(target.elts, value.elts,
                                                                  strict=True)]
        elif isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Call | ast.Await):
            call = value.value if isinstance(value, ast.Await) else value
            positions = (self.functions.get(_dotted(call.func).rsplit(".", 1)[-1], set())
                         if isinstance(call, ast.Call) else set())
            if ALL in positions or self.is_timed(value, names):
                pairs = [(target, True)]
            else:
                pairs = [(t, i in positions) for i, t in enumerate(target.elts)]
        else:
            pairs = [(target, self.is_timed(value, names))]
        new = False
        for part, is_timed in pairs:
            if not is_timed:
                continue
            for sub in ast.walk(part):
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.add(sub.id)
                    new = True
        return new

    def names_of(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        """Names ``fn`` binds to timed values (assignments, loops and comprehensions over
        timed lists, ``append`` of a timed value), to a fixpoint."""
        bindings = self._bindings.get(fn)
        if bindings is None:
            bindings = self._bindings[fn] = list(_bindings_of(fn))
        names: set[str] = set()
        changed = True
        while changed:
            changed = False
            for target, value in bindings:
                changed |= self._bind(target, value, names)
        return names


def _bindings_of(fn: ast.FunctionDef | ast.AsyncFunctionDef
                 ) -> Iterator[tuple[ast.expr, ast.expr]]:
    """(target, value) of each binding in ``fn``, nested functions included."""
    for node in ast.walk(fn):
        match node:
            case ast.Assign(targets=targets, value=value):
                for target in targets:
                    yield target, value
            case ast.AnnAssign(target=target, value=value) if value is not None:
                yield target, value
            case ast.AugAssign(target=target, value=value) | ast.NamedExpr(
                    target=target, value=value):
                yield target, value
            case ast.For(target=target, iter=value) | ast.AsyncFor(
                    target=target, iter=value) | ast.comprehension(target=target, iter=value):
                yield target, value
            case ast.Call(func=ast.Attribute(value=target, attr="append" | "add"),
                          args=[value]):
                yield target, value


def _bounds(test: ast.Compare, timed: _Timed, names: set[str]) -> list[bool]:
    """For each timed-vs-untimed ordering in ``test``: True for an upper bound on the
    timed side, False for a lower bound."""
    found = []
    operands = [test.left, *test.comparators]
    for op, left, right in zip(test.ops, operands, operands[1:], strict=False):
        left_timed, right_timed = timed.is_timed(left, names), timed.is_timed(right, names)
        if isinstance(op, ast.Eq | ast.NotEq) and (left_timed or right_timed) and any(
                "approx" in _dotted(side.func) for side in (left, right)
                if isinstance(side, ast.Call)):
            found.append(True)
        if not isinstance(op, ORDERING) or left_timed == right_timed:
            continue
        below = isinstance(op, ast.Lt | ast.LtE)  # left < right
        found.append(below if left_timed else not below)
    return found


def violations(path: Path) -> list[Finding]:
    """Every wall-clock bound asserted in the default suite's code of ``path``."""
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    if _module_marks(tree) & OUTSIDE_DEFAULT:
        return []
    timed = _Timed(tree)
    found: list[Finding] = []

    def visit(fn: ast.FunctionDef | ast.AsyncFunctionDef, outside: bool) -> None:
        if outside or _marks(fn.decorator_list) & OUTSIDE_DEFAULT:
            return
        if {a.arg for a in fn.args.args + fn.args.kwonlyargs} & VIRTUAL_CLOCK_FIXTURES:
            return
        names = timed.names_of(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Assert):
                continue
            for test in ast.walk(node.test):
                if not isinstance(test, ast.Compare):
                    continue
                for upper in _bounds(test, timed, names):
                    text = "\n".join(lines[node.lineno - 1:node.end_lineno or node.lineno])
                    reason = None
                    if ALLOW in text:
                        reason = text.split(ALLOW, 1)[1].split("\n", 1)[0].strip() or None
                    found.append(Finding(path, node.lineno, text, upper, reason))

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            visit(node, False)
        elif isinstance(node, ast.ClassDef):
            slow = bool(_marks(node.decorator_list) & OUTSIDE_DEFAULT)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    visit(item, slow)
    return sorted(set(found), key=lambda f: f.line)
