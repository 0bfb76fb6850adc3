"""`fixup_module_metadata`: public names say the package they are imported from.

Shared by the three packages (codec, processors, remoting and its public subpackages); it
lives in codec because codec is the one package the other two import, and it imports
nothing itself.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["fixup_module_metadata"]


def fixup_module_metadata(module_name: str, namespace: dict[str, Any]) -> None:
    """Set ``__module__`` to ``module_name`` on each class and function of its ``__all__``
    (in ``namespace``, the package's globals) defined in one of our private modules, or in a
    submodule of ``module_name``.

    Then reprs and tracebacks name ``remoting.RemotingTimeoutError``, not
    ``remoting._errors.RemotingTimeoutError``; pickle names a class or function by that
    public path (it is found there); and Sphinx documents each under its package. Done once
    per package, after its imports, as trio's ``trio._util.fixup_module_metadata``. A name
    re-exported from another package of ours (``remoting.RemotingCommand`` is codec's) keeps
    its own.
    """
    root = module_name.partition(".")[0]
    for name in namespace["__all__"]:
        obj = namespace[name]
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # constants and type aliases have no module of their own
        home: str = obj.__module__
        private = any(part.startswith("_") for part in home.split("."))
        if home.partition(".")[0] == root and (private or home.startswith(module_name + ".")):
            obj.__module__ = module_name
