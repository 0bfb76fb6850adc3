"""Say so when a module of the user's shadows one of trio-remoting's top-level packages.

trio-remoting installs three top-level packages, ``codec``, ``processors`` and ``remoting``
(the product's layout fixes the names). A ``processors.py`` or ``codec.py`` next to a user's
script comes first on ``sys.path``, and ``import remoting`` then failed deep inside with
``ImportError: cannot import name 'RequestProcessor' from 'processors' (.../processors.py)``.
Importing this module (``remoting/__init__`` does, before anything else) checks both names
first and raises an `ImportError` that says which file to rename. It only looks (no import):
a module not found at all is left to the import that needs it.
"""

from __future__ import annotations

import importlib.util
import os

__all__ = ["shadowing"]

# A file each of our packages has, and a namesake of the user's would not.
MARKERS = {"codec": "_decoder.py", "processors": "_base.py"}


def shadowing(name: str, marker: str) -> str | None:
    """Return where the module that ``import name`` finds lives, if it is not trio-remoting's
    package (a plain module, or a package without ``marker``); else None."""
    spec = importlib.util.find_spec(name)  # an imported module: its own spec
    if spec is None:
        return None
    if spec.submodule_search_locations is None:  # a module, not a package: codec.py
        return spec.origin or name
    origin = spec.origin
    if origin and os.path.isfile(origin):  # a package on disk (not in a zip: no way to look)
        folder = os.path.dirname(origin)
        if not os.path.isfile(os.path.join(folder, marker)):
            return folder
    return None


def _check() -> None:
    for name, marker in MARKERS.items():
        where = shadowing(name, marker)
        if where is not None:
            raise ImportError(
                f"a module named {name!r} at {where} shadows trio-remoting's package "
                f"{name!r}; rename it (trio-remoting's top-level packages are codec, "
                "processors and remoting)", name=name, path=where)


_check()
