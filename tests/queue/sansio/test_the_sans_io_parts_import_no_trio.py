"""The queue's bookkeeping (`remoting/queue/_sansio/`) and what the messaging features share
(`remoting/_messaging/`) are sans-I/O: importing them, and everything they import, loads no
trio.

`remoting/__init__.py` and `remoting/queue/__init__.py` import the faces, and so trio, by
design: a fresh interpreter is given empty packages of the same paths, so that only the
modules asked for (and what they import themselves) are loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FOLDERS = {"remoting.queue._sansio": ROOT / "remoting" / "queue" / "_sansio",
           "remoting._messaging": ROOT / "remoting" / "_messaging"}

PROBE = """
import importlib, sys, types
for name, path in {packages!r}.items():
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package  # its __init__ (the faces) is not run
loaded = {{}}
for name in {names!r}:
    importlib.import_module(name)
    loaded[name] = "trio" in sys.modules
print(loaded)
"""


def modules() -> list[str]:
    return sorted(f"{package}.{p.stem}" for package, folder in FOLDERS.items()
                  for p in folder.glob("*.py") if p.stem != "__init__")


def probe(names: list[str]) -> str:
    packages = {"remoting": str(ROOT / "remoting"),
                "remoting.queue": str(ROOT / "remoting" / "queue")}
    out = subprocess.run([sys.executable, "-c", PROBE.format(packages=packages, names=names)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_queue_s_bookkeeping_and_the_shared_parts_load_no_trio() -> None:
    names = modules()
    assert "remoting.queue._sansio._channel_queue" in names  # the folders were found
    assert "True" not in probe(names)


def test_the_probe_would_see_trio_if_a_module_loaded_it() -> None:
    assert "True" in probe(["remoting.queue._stream_steps"])
