"""The sans-I/O layers never pull in trio (docs/architecture.md): checked in a fresh interpreter."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


def assert_imports_without(modules: list[str], forbidden: list[str]) -> None:
    imports = "; ".join(f"import {m}" for m in modules)
    script = (
        f"import sys; {imports}; "
        f"loaded = sorted(m for m in {forbidden!r} if m in sys.modules); "
        "assert not loaded, f'imported {loaded}'"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_importing_codec_leaves_trio_and_structlog_unloaded() -> None:
    assert_imports_without(["codec"], ["trio", "structlog"])


def _processors_base_missing() -> bool:
    try:
        return importlib.util.find_spec("processors._base") is None
    except ModuleNotFoundError:
        return True


def test_importing_processors_base_leaves_trio_unloaded() -> None:
    if _processors_base_missing():
        pytest.skip("processors not written yet")
    assert_imports_without(["codec", "processors._base"], ["trio"])
