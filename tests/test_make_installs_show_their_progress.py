"""The first ``make demo`` / ``make test`` installs for minutes on a machine without a wheel
cache: pip shows its progress (it ran with ``-q``: one line, then nothing)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("target", ["demo", "test", "docs"])
def test_every_install_of_a_fresh_checkout_shows_pip_s_progress(tmp_path: Path, target: str
                                                                 ) -> None:
    # a dry run (-n) for a venv that does not exist yet: the commands a fresh checkout runs
    plan = subprocess.run(["make", "-n", f"VENV={tmp_path / 'venv'}", target], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True).stdout
    installs = [line.split() for line in plan.splitlines() if "pip install" in line]
    assert installs, plan
    for words in installs:
        assert "-q" not in words and "--quiet" not in words, " ".join(words)
