"""Which implementation of the codec's hot functions runs: compiled, or pure Python.

The compiled fast path is one C extension, ``codec._speedups`` (``codec/_speedups.c``),
built by the ordinary install when a C compiler is there (``hatch_build.py``). Each of its
functions is a fast path of a Python function that stays the specification and handles every
case the fast path does not (errors included); the modules that own them swap in the compiled
one at import (``_command``, ``_header_json``, ``_header_binary``, ``_encoder``).

The pure-Python package always works: with ``TRIO_REMOTING_PURE_PYTHON=1`` (any value but
``0`` or empty) the extension is never imported; without a compiler it was never built; and
an extension built from another version of ``_speedups.c`` than the one beside it (a source
checkout edited since its build) is not used. `STATUS` says which, and why.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

__all__ = ["COMPILED", "PURE_PYTHON_ENV", "STATUS", "adopt_doc", "load_extension", "speedups"]

PURE_PYTHON_ENV: Final = "TRIO_REMOTING_PURE_PYTHON"


def load_extension(package: str, folder: Path) -> tuple[ModuleType | None, str]:
    """Import ``<package>._speedups`` (built from ``<folder>/_speedups.c``) unless pure Python
    is asked for, it was never built, or it is stale; return it (or None) and why, in words.

    The one rule for every compiled kernel of the package: the codec's, and the transport's
    (``remoting/_core/_receiving/_speedups.c``), each loaded by the module that owns it.
    """
    source = folder / "_speedups.c"
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, f"pure Python ({PURE_PYTHON_ENV} is set)"
    try:
        module = importlib.import_module(f"{package}._speedups")
    except ImportError:
        return None, ("pure Python (the compiled fast path was not built: no C compiler at "
                      "install, or the package was built with TRIO_REMOTING_PURE_PYTHON=1)")
    built: str = getattr(module, "SOURCE_SHA256", "")
    if source.exists() and built:  # a source checkout: the extension must be this source's
        if hashlib.sha256(source.read_bytes()).hexdigest() != built:
            where = source.relative_to(source.parents[len(package.split("."))])
            return None, (f"pure Python (the compiled fast path is stale: {where} "
                          "changed since it was built; rebuild with `python hatch_build.py` "
                          "or reinstall)")
    return module, "compiled"


speedups, STATUS = load_extension(__package__ or "codec", Path(__file__).parent)
COMPILED: Final = speedups is not None


def adopt_doc(compiled: object, python: Callable[..., Any], *, method: bool = False) -> None:
    """Give a compiled function its Python twin's docstring and signature (without the
    annotations, which a C function cannot carry), so that ``help()``, `inspect` and the API
    reference show the specification whichever path runs."""
    assert speedups is not None
    sig = inspect.signature(python)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    inner = str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))[1:-1]
    if method:  # the first parameter is self
        inner = "$self" + inner[len(params[0].name):]
    else:
        inner = "$module" + (", " + inner if inner else "")
    speedups.set_doc(compiled, f"{python.__name__}({inner})\n--\n\n"
                               f"{inspect.cleandoc(python.__doc__ or '')}")
