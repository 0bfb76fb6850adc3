"""Cluster fixtures: one standalone cluster per run, the executors' packages, server fleets.

Every test here is marked ``cluster`` (``make test-cluster``; not part of ``make test``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.processes import ROOT

from .fleet import Fleet
from .standalone import StandaloneCluster, code_zip, packed_env

JOB_TIMEOUT = 600.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def cluster() -> Iterator[StandaloneCluster]:
    with StandaloneCluster(cores=2, memory="2g") as c:
        yield c


@pytest.fixture(scope="session")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv-pack archive of the third-party packages, zip of this checkout's packages)."""
    return packed_env(), code_zip(tmp_path_factory.mktemp("code"))


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with Fleet(3) as f:
        yield f


@dataclass
class JobRun:
    result: dict[str, Any]
    stderr: str
    killed_at_rows: int | None = None
    victim: str | None = None
    seconds: float = 0.0


def run_job(cluster: StandaloneCluster, shipped: tuple[Path, Path], fleet: Fleet, tmp: Path,
            *, mode: str, rows: int, idempotent: bool = False, on_error: str = "null",
            fault: int | None = None, cooldown: float = 10.0) -> JobRun:
    """Run tests/cluster/fleet_job.py; with ``fault`` (SIGKILL or SIGSTOP) hit one server.

    The fault hits one server (`Fleet.hit_mid_job`) while it handles a row request, once the
    fleet has served a random 20-60% of the rows: mid-job, with rows in flight, by construction.
    """
    env_archive, code = shipped
    result_file = tmp / f"result-{mode}-{time.monotonic_ns()}.json"
    cmd = [sys.executable, "-m", "tests.cluster.fleet_job", "--master", cluster.master_url,
           "--addresses", ",".join(fleet.addresses), "--mode", mode, "--rows", str(rows),
           "--on-error", on_error, "--cooldown", str(cooldown), "--env", str(env_archive),
           "--code", str(code), "--result", str(result_file)]
    if idempotent:
        cmd.append("--idempotent")
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1")
    started = time.monotonic()
    job = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    run = JobRun(result={}, stderr="")
    try:
        assert job.stdout is not None
        if fault is not None and job.stdout.readline().strip() == "ready":
            hit = fleet.hit_mid_job(rows, fault, stop_waiting=lambda: job.poll() is not None)
            if hit is not None:
                run.killed_at_rows, run.victim = hit
        _, run.stderr = job.communicate(timeout=JOB_TIMEOUT - (time.monotonic() - started))
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    run.seconds = time.monotonic() - started
    run.result = json.loads(result_file.read_text())
    return run


