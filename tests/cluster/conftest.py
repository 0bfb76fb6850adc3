"""Cluster fixtures: one standalone cluster per run, the executors' packages, server fleets.

Every test here is marked ``cluster`` (``make test-cluster``; not part of ``make test``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codec import RemotingCommand
from remoting import RemotingClient, RemotingError
from tests.processes import ROOT, Proc

from .fleet_service import SERVED
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


@dataclass
class Fleet:
    """Server processes (``remoting serve``), each on an ephemeral port."""

    procs: list[Proc] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)

    def served(self, client: RemotingClient) -> list[int]:
        """Rows served so far by each server (0 for one that does not answer in 0.5 s)."""
        counts = []
        for addr in self.addresses:
            try:
                response = client.invoke_sync(addr, RemotingCommand(code=SERVED), timeout=0.5)
            except RemotingError:  # a dead or stopped server: it serves nothing more
                counts.append(0)
                continue
            counts.append(int(response.body or b"0"))
        return counts


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    fleet = Fleet()
    try:
        for _ in range(3):
            proc = Proc("--log-level", "error", "serve", "tests.cluster.fleet_service:processors",
                        "--port", "0")
            fleet.procs.append(proc)
            port = proc.expect(r"on 127\.0\.0\.1:(\d+)").group(1)
            fleet.addresses.append(f"127.0.0.1:{port}")
        yield fleet
    finally:
        for proc in fleet.procs:
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGCONT)  # a stopped one cannot take SIGTERM
            proc.stop()


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

    The fault hits a random server once the fleet has served a random 20-60% of the rows,
    which is mid-job by construction.
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
        if fault is not None:
            _hit_one_server(job, fleet, rows, fault, run)
        _, run.stderr = job.communicate(timeout=JOB_TIMEOUT - (time.monotonic() - started))
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    run.seconds = time.monotonic() - started
    run.result = json.loads(result_file.read_text())
    return run


def _hit_one_server(job: subprocess.Popen[str], fleet: Fleet, rows: int, fault: int,
                    run: JobRun) -> None:
    """Once a random 20-60% of the rows are served, hit a server that is serving right now.

    "Right now": its count grew since the previous look (20 ms before), so it very likely
    has rows in flight when the signal lands.
    """
    assert job.stdout is not None
    if job.stdout.readline().strip() != "ready":  # executors up; the counted job starts now
        return
    threshold = int(rows * random.uniform(0.2, 0.6))
    deadline = time.monotonic() + JOB_TIMEOUT
    with RemotingClient() as client:
        before = fleet.served(client)
        while True:
            if job.poll() is not None or time.monotonic() > deadline:
                return
            time.sleep(0.02)  # polling another process's progress
            now = fleet.served(client)
            busy = [i for i, (b, n) in enumerate(zip(before, now, strict=True)) if n > b]
            if sum(now) >= threshold and busy:
                break
            before = now
    victim = random.choice(busy)
    fleet.procs[victim].popen.send_signal(fault)
    run.killed_at_rows = sum(now)
    run.victim = fleet.addresses[victim]
