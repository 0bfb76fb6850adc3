"""Docstrings and comments of codec/, processors/ and remoting/ name only what exists.

A name in single backticks is a reference to code (Sphinx's default role), so it must
resolve; a file named so (`_sender.py`) must be in the repository:

- ``a.b.c`` rooted at one of our packages or modules (``remoting.x``, ``_core._calling``,
  ``_faces._blocking.RemotingClient``) resolves to a module, then to its names;
- ``Class.attr`` for a class of ours needs ``attr`` on the class (or one of our bases; a class
  with an outside base is not checked);
- a bare ``name`` in lower case is a name of the same module (its classes' attributes and
  those their bases of ours set included), a function or class of ours, a public name, a
  module, or the standard library's; in upper or capital case (a class or a
  constant) one defined anywhere in the tree or imported by that module.

Names from elsewhere (RocketMQ's Java, OpenTelemetry's SDK, a user's ``processors.py``) go in
double backticks, which mark literal text and are not checked. The check reads the source
(ast and tokenize) and imports nothing.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("codec", "processors", "remoting")
SINGLE = re.compile(r"(?<![`\w])`([^`\s]+?)`(?!`)")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")

Module = tuple[str, ...]


def bound_names(node: ast.AST) -> set[str]:
    """The names one statement binds (definitions, assignments, imports; inside an ``if``
    or a ``try`` too, as ``if TYPE_CHECKING:`` imports are)."""
    if isinstance(node, ast.If | ast.Try):
        inner = [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                 *(s for h in getattr(node, "handlers", []) for s in h.body)]
        return set().union(*map(bound_names, inner))
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


@dataclass
class SourceTree:
    """What the packages define, read from their source."""

    root: Path
    packages: tuple[str, ...]
    trees: dict[Path, ast.Module] = field(default_factory=dict)
    modules: dict[Module, Path] = field(default_factory=dict)
    top: dict[Module, set[str]] = field(default_factory=dict)  # a module's own names
    own: dict[Module, set[str]] = field(default_factory=dict)  # ... and its classes' attributes
    classes: dict[str, list[tuple[set[str], list[str]]]] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    bases_in: dict[Module, list[str]] = field(default_factory=dict)  # its classes' bases

    def __post_init__(self) -> None:
        for pkg in self.packages:
            for path in sorted((self.root / pkg).rglob("*.py")):
                self.trees[path] = tree = ast.parse(path.read_text())
                parts = path.relative_to(self.root).with_suffix("").parts
                module = parts[:-1] if parts[-1] == "__init__" else parts
                self.modules[module] = path
                self.top[module] = set().union(*map(bound_names, tree.body))
                self.own[module] = set(self.top[module])
                for node in ast.walk(tree):
                    if isinstance(node, ast.ClassDef):
                        attrs = self.class_attributes(node)
                        bases = [ast.unparse(b).split("[")[0].rsplit(".")[-1] for b in node.bases]
                        self.classes.setdefault(node.name, []).append((attrs, bases))
                        self.own[module] |= attrs
                        self.bases_in.setdefault(module, []).extend(bases)
        for module, bases in self.bases_in.items():  # what a class's bases set, anywhere
            self.own[module] |= set().union(*(self.inherited(b) for b in bases))
        self.files = {p.relative_to(self.root).as_posix() for p in self.root.rglob("*")
                      if not {".venv", ".git"} & set(p.parts) and p.is_file()}
        self.defined = set().union(*self.top.values(), *(
            attrs for found in self.classes.values() for attrs, _ in found))
        public = {name for module, names in self.top.items()
                  if self.modules[module].name == "__init__.py"
                  for name in names if not name.startswith("_")}
        self.functions = {n.name for t in self.trees.values() for n in ast.walk(t)
                          if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
        self.module_parts = {part for module in self.modules for part in module}
        self.known = self.functions | public | self.module_parts

    @staticmethod
    def class_attributes(node: ast.ClassDef) -> set[str]:
        attrs = set().union(*map(bound_names, node.body))
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls")):
                attrs.add(sub.attr)
        return attrs

    def inherited(self, cls: str, seen: frozenset[str] = frozenset()) -> set[str]:
        """The attributes of our class ``cls`` and of its bases of ours."""
        found: set[str] = set()
        for attrs, bases in self.classes.get(cls, []):
            found |= attrs
            for base in bases:
                if base not in seen:
                    found |= self.inherited(base, seen | {cls})
        return found

    def class_has(self, cls: str, attr: str, seen: frozenset[str] = frozenset()) -> bool:
        for attrs, bases in self.classes.get(cls, []):
            if attr in attrs:
                return True
            for base in bases:
                if base not in self.classes:
                    return True  # an outside base (trio's, the standard library's): not checked
                if base not in seen and self.class_has(base, attr, seen | {cls}):
                    return True
        return False

    def modules_ending(self, parts: list[str]) -> Iterator[tuple[Module, list[str]]]:
        """Each module whose path ends with a prefix of ``parts``, and the rest of them."""
        for module in self.modules:
            for k in range(len(parts), 0, -1):
                if module[-k:] == tuple(parts[:k]):
                    yield module, parts[k:]
                    break

    def resolves(self, ref: str, module: Module) -> bool:
        """Whether ``ref``, named in ``module``, names something that exists."""
        ref = re.sub(r"\(.*$", "", ref.rstrip(",;:"))
        if ref.endswith(".py"):
            return any(f == ref or f.endswith("/" + ref) for f in self.files)
        if not DOTTED.fullmatch(ref):
            return True  # a value or an expression, not a name
        parts = ref.split(".")
        ours = parts[0] in self.packages or (parts[0].startswith("_") and len(parts) > 1
                                             and parts[0] in self.module_parts)
        if ours:
            return any(not rest or rest[0] in self.top[found] and (
                len(rest) == 1 or (*found, rest[0]) in self.modules
                or self.class_has(rest[0], rest[1])) for found, rest in self.modules_ending(parts))
        if len(parts) > 1:
            return parts[0] not in self.classes or self.class_has(parts[0], parts[1])
        name = parts[0]
        if name.startswith("__") or hasattr(builtins, name) or name in sys.stdlib_module_names:
            return True
        if name[0].isupper():
            return name in self.defined or name in self.top[module]
        return name in self.known or name in self.own[module]

    def problems(self) -> list[str]:
        """Every reference that names nothing, as ``path:line: `name```."""
        found = []
        for path, tree in self.trees.items():
            module = next(m for m, p in self.modules.items() if p == path)
            for line, text in docstrings_and_comments(tree, path.read_text()):
                found += [f"{path.relative_to(self.root)}:{line}: `{ref}`"
                          for ref in SINGLE.findall(text) if not self.resolves(ref, module)]
        return found


def docstrings_and_comments(tree: ast.Module, source: str) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                yield node.body[0].lineno, doc
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def test_docstrings_and_comments_name_only_what_exists() -> None:
    assert SourceTree(ROOT, PACKAGES).problems() == []


def test_the_check_finds_names_that_do_not_exist(tmp_path: Path) -> None:
    pkg = tmp_path / "remoting"
    (pkg / "_core").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""`_core._outbound` and `remoting.otel`."""\n')
    (pkg / "_core" / "__init__.py").write_text("")
    (pkg / "_core" / "_outbound.py").write_text(
        '"""`Outbound`: `take` then `sent`, or `pending` (see `_sender.py`, `_outbound.py`).'
        '\n\n``pending.py`` and ``remoting._core.Outbound`` are literal text.\n"""\n'
        "import socket\n\n\nclass Outbound:\n"
        '    """`Outbound.take`, `Outbound.gone`, `Sender.send` and `socket`."""\n\n'
        "    def take(self) -> None:\n        self.sent = 0  # `sent` and `missing`\n")
    (pkg / "_core" / "_other.py").write_text(
        "from ._outbound import Outbound\n\n\nclass Other(Outbound):\n"
        '    """`sent` is set by its base, `taken` by nothing."""\n\n    pending = 1\n')
    assert SourceTree(tmp_path, ("remoting",)).problems() == [
        "remoting/__init__.py:1: `remoting.otel`",
        "remoting/_core/_other.py:5: `taken`",
        "remoting/_core/_outbound.py:1: `pending`",
        "remoting/_core/_outbound.py:1: `_sender.py`",
        "remoting/_core/_outbound.py:9: `Outbound.gone`",
        "remoting/_core/_outbound.py:12: `missing`",
    ]
