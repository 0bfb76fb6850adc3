"""What a user of the installed package meets: its version, and clear word of missing extras."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import remoting

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_written_once_and_read_by_the_build() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "remoting/_version.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", remoting.__version__)


def test_the_license_file_is_the_declared_one() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]


@pytest.mark.parametrize(("missing", "module", "says"), [
    ("pyspark", "remoting.spark", "pip install 'trio-remoting[spark]'"),
    ("pyarrow", "remoting.spark", "pip install 'trio-remoting[spark]'"),
    ("construct", "codec.spec", "pip install 'trio-remoting[spec]'"),
])
def test_a_missing_extra_is_named(missing: str, module: str, says: str) -> None:
    program = f"import sys; sys.modules[{missing!r}] = None; import {module}"
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert f"ImportError: {module} needs" in result.stderr
    assert says in result.stderr


def test_the_transport_runs_without_construct() -> None:
    program = ("import sys; sys.modules['construct'] = None; import codec, remoting, "
               "processors; print('ok')")
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr
