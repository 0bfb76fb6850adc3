"""The parts both drivers share (`remoting/_core/_sansio/`) are sans-I/O: importing them, and
everything they import, loads no trio (two drivers over one sans-I/O core: docs/architecture.md).

`remoting/__init__.py` imports the faces, and so trio, by design: a fresh interpreter is
given an empty `remoting` package of the same path, so that only the modules asked for (and
what they import themselves) are loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SANSIO = ROOT / "remoting" / "_core" / "_sansio"

PROBE = """
import importlib, sys, types
package = types.ModuleType("remoting")
package.__path__ = [{path!r}]
sys.modules["remoting"] = package  # its __init__ (the faces) is not run
loaded = {{}}
for name in {names!r}:
    importlib.import_module(name)
    loaded[name] = "trio" in sys.modules
print(loaded)
print(sorted(m for m in sys.modules if m == "trio" or m.startswith("trio.")))
"""


def sansio_modules() -> list[str]:
    return sorted(f"remoting._core._sansio.{p.stem}" for p in SANSIO.glob("*.py")
                  if p.stem != "__init__")


def test_the_shared_parts_are_all_in_one_folder() -> None:
    names = {n.rsplit(".", 1)[1] for n in sansio_modules()}
    assert {"_response_table", "_addresses", "_connection_state", "_connection_core",
            "_outbound", "_receive_buffers", "_backoff", "_call_kinds"} <= names


def test_importing_the_sans_io_core_loads_no_trio() -> None:
    names = sansio_modules()
    probe = PROBE.format(path=str(ROOT / "remoting"), names=names)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded, trio_modules = out.stdout.splitlines()
    assert "True" not in loaded, loaded  # each module, in turn, left trio out
    assert trio_modules == "[]"


def test_the_probe_would_see_trio_if_a_module_loaded_it() -> None:
    """The probe is not blind: a trio driver's module, given the same empty package, loads
    trio."""
    probe = PROBE.format(path=str(ROOT / "remoting"),
                         names=["remoting._core._trio_driver._permits"])
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "True" in out.stdout.splitlines()[0]
