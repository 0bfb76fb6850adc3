"""What a user of the installed package meets: its version, and clear word of missing extras."""

from __future__ import annotations

import os
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


@pytest.mark.parametrize(("env", "says"), [
    ({"CC": "/bin/false"}, "trio-remoting: could not compile the fast path (CompileError: "),
    ({"TRIO_REMOTING_PURE_PYTHON": "1"},
     "trio-remoting: TRIO_REMOTING_PURE_PYTHON is set: building the pure-Python package"),
])
def test_a_build_without_a_compiler_gives_the_pure_package_in_one_line(
        tmp_path: Path, env: dict[str, str], says: str) -> None:
    """What the build hook does where the fast path cannot (or must not) be compiled: one
    line saying so, and no extension, so the wheel is the pure-Python one (.ci/wheel-check
    builds that wheel with CC=/bin/false and checks it is py3-none-any)."""
    program = ("import pathlib, sys, hatch_build; "
               "print(hatch_build.build(pathlib.Path(sys.argv[1]), inplace=False))")
    run_env = {k: v for k, v in os.environ.items() if k != "TRIO_REMOTING_PURE_PYTHON"}
    result = subprocess.run([sys.executable, "-c", program, str(tmp_path)], cwd=ROOT,
                            env={**run_env, **env}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "None"  # nothing built: the pure package
    ours = [line for line in result.stderr.splitlines() if line.startswith("trio-remoting:")]
    assert len(ours) == 1, result.stderr
    assert ours[0].startswith(says), ours
    assert "pure-Python package" in ours[0]
    assert not list(tmp_path.rglob("_speedups*.so"))
