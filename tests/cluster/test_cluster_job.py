"""A job on a real Spark standalone cluster (Master and Worker JVMs on 127.0.0.1).

The executors run Python from a venv-pack archive shipped with ``spark.archives`` and this
checkout's packages from a zip in ``spark.submit.pyFiles``: they see neither the checkout nor
``.venv``, as on a cluster where nothing is preinstalled.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.processes import ROOT

from .conftest import run_job

if TYPE_CHECKING:
    from .fleet import Fleet
    from .standalone import StandaloneCluster

# here too, not only by the conftest: the marker must be known when tests are generated
# (tests/conftest.py runs cluster tests on the default io only)
pytestmark = pytest.mark.cluster

ROWS = 20_000


@pytest.mark.parametrize("mode", ["row", "batch"])
def test_every_row_comes_back_right_through_a_standalone_cluster(
        cluster: StandaloneCluster, shipped: tuple[Path, Path], fleet: Fleet, tmp_path: Path,
        mode: str) -> None:
    run = run_job(cluster, shipped, fleet, tmp_path, mode=mode, rows=ROWS)

    result = run.result
    assert "failed" not in result, run.stderr[-3000:]
    assert (result["rows"], result["right"], result["wrong"], result["errors"]) == (
        ROWS, ROWS, 0, 0)
    executors = result["executors"]
    assert all(e.endswith("environment/bin/python") for e in executors["executable"])
    assert all("trio_remoting_code.zip" in r for r in executors["remoting"])
    checkout, venv = str(ROOT), str(ROOT / ".venv")
    assert not [p for p in executors["path"] if p.startswith((checkout, venv))]


def test_the_demo_runs_against_the_standalone_cluster(
        cluster: StandaloneCluster, tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)

    done = subprocess.run(
        [sys.executable, "-m", "remoting", "demo", "--master", cluster.master_url,
         "--rows", "20000", "--partitions", "4", "--output", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)

    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert f"Spark {cluster.master_url}" in done.stdout
    for mode in ("per-row", "batch"):
        fields = next(line for line in done.stdout.splitlines() if line.startswith(mode)).split()
        assert fields[1] == "20,000" and fields[5] == "0" and fields[-1] == "0"
