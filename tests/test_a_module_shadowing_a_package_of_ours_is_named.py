"""A ``processors.py`` or ``codec.py`` of the user's next to their script shadows one of
trio-remoting's top-level packages: ``import remoting`` says which file to rename (it failed
with ``cannot import name 'RequestProcessor' from 'processors'``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def run_script(folder: Path, code: str) -> subprocess.CompletedProcess[str]:
    (folder / "script.py").write_text(code)
    return subprocess.run([sys.executable, "script.py"], cwd=folder, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.parametrize("name", ["processors", "codec"])
def test_a_module_of_the_user_s_named_like_a_package_of_ours_is_named(
        tmp_path: Path, name: str) -> None:
    (tmp_path / f"{name}.py").write_text("HELPERS = 1\n")
    result = run_script(tmp_path, "import remoting\n")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == (f"ImportError: a module named {name!r} at {tmp_path / name}.py shadows "
                    f"trio-remoting's package {name!r}; rename it (trio-remoting's top-level "
                    "packages are codec, processors and remoting)")


def test_a_package_of_the_user_s_named_like_ours_is_named(tmp_path: Path) -> None:
    (tmp_path / "processors").mkdir()
    (tmp_path / "processors" / "__init__.py").write_text("")
    result = run_script(tmp_path, "import remoting\n")
    assert f"a module named 'processors' at {tmp_path / 'processors'} shadows" in result.stderr


def test_modules_with_other_names_change_nothing(tmp_path: Path) -> None:
    (tmp_path / "process.py").write_text("X = 1\n")
    result = run_script(tmp_path, "import remoting, processors, codec\nprint('ok')\n")
    assert result.stdout == "ok\n", result.stderr
