"""The death tests: a server of three dies (SIGKILL) or hangs (SIGSTOP) in the middle of a job.

Each job upper-cases 200,000 rows on the standalone cluster, per row (`remote_udf`) or per
Arrow batch (`remote_batch_udf`), against three ``remoting serve`` processes; once the fleet
has served a random 20-60% of the rows, one server sends itself the signal while it handles
a row request, so rows are in flight when it dies or hangs. What must hold:

- ``idempotent=True``: the job finishes, every row is right, no error rows;
- at most once (the default) with ``on_error="null"``: the job finishes, no row is wrong,
  the rows lost with the server carry a transport error (counted);
- at most once with ``on_error="raise"``: a lost row fails its task with `RemoteCallError`,
  Spark runs the task again (its rows go to the servers still up), and the job finishes
  right; had the retries run out, the job would fail naming `RemoteCallError`.

A hung server is bounded by the timeouts: its requests time out, it cools down, the job
never waits on it for long.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import JobRun, run_job

if TYPE_CHECKING:
    from .fleet import Fleet
    from .standalone import StandaloneCluster

# here too, not only by the conftest: the marker must be known when tests are generated
# (tests/conftest.py runs cluster tests on the default io only)
pytestmark = pytest.mark.cluster

ROWS = 200_000
MODES = ["row", "batch"]
MAX_JOB_SECONDS = 120.0


def faulted(name: str, cluster: StandaloneCluster, shipped: tuple[Path, Path], fleet: Fleet,
            tmp: Path, *, mode: str, fault: int, idempotent: bool = False,
            on_error: str = "null") -> JobRun:
    """Run the job with ``fault`` hitting one server; print what happened; check that the
    fault landed mid-job."""
    run = run_job(cluster, shipped, fleet, tmp, rows=ROWS, mode=mode, fault=fault,
                  idempotent=idempotent, on_error=on_error)
    r = run.result
    print(f"\n{name}: {run.seconds:.1f} s (job {r.get('seconds', 0):.1f} s), fault at "
          f"{run.killed_at_rows} rows served; right {r.get('right')}, errors {r.get('errors')}, "
          f"failed {r.get('failed', '-')[:200]}")
    assert run.killed_at_rows is not None and run.killed_at_rows < ROWS  # mid-job
    return run


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fault", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "hung"])
def test_idempotent_job_survives_a_lost_server_with_every_row_right(
        cluster: StandaloneCluster, shipped: tuple[Path, Path], fleet: Fleet, tmp_path: Path,
        mode: str, fault: int) -> None:
    run = faulted(f"{signal.Signals(fault).name}, idempotent, {mode}", cluster, shipped,
                  fleet, tmp_path, mode=mode, idempotent=True, fault=fault)

    assert "failed" not in run.result, run.stderr[-3000:]
    assert (run.result["rows"], run.result["right"], run.result["errors"]) == (ROWS, ROWS, 0)
    # A hung server costs timeouts and a cool-down, never a stuck job (it takes 10-25 s).
    assert run.result["seconds"] < MAX_JOB_SECONDS


@pytest.mark.parametrize("mode", MODES)
def test_at_most_once_job_reports_the_rows_lost_with_a_killed_server(
        cluster: StandaloneCluster, shipped: tuple[Path, Path], fleet: Fleet, tmp_path: Path,
        mode: str) -> None:
    run = faulted(f"kill, at most once, null, {mode}", cluster, shipped, fleet, tmp_path,
                  mode=mode, on_error="null", fault=signal.SIGKILL)

    r = run.result
    assert "failed" not in r, run.stderr[-3000:]
    assert r["rows"] == ROWS and r["wrong"] == 0
    assert r["right"] + r["errors"] == ROWS
    assert r["errors"] > 0  # the server died with rows in flight: those were not resent
    # Lost rows carry a transport error: connection lost / refused, or a timeout.
    assert r["send_failed"] + r["timeout"] + r["unknown"] == r["errors"]


@pytest.mark.parametrize("mode", MODES)
def test_at_most_once_job_with_raise_is_retried_by_spark(
        cluster: StandaloneCluster, shipped: tuple[Path, Path], fleet: Fleet, tmp_path: Path,
        mode: str) -> None:
    run = faulted(f"kill, at most once, raise, {mode}", cluster, shipped, fleet, tmp_path,
                  mode=mode, on_error="raise", fault=signal.SIGKILL)

    if "failed" in run.result:  # Spark's retries ran out: the error says what happened
        assert "RemoteCallError" in run.result["failed"]
    else:
        assert (run.result["rows"], run.result["right"]) == (ROWS, ROWS)
    lost = re.findall(r"Lost task \S+ in stage", run.stderr)
    print(f"tasks lost and run again: {len(lost)}")
    # The server died with rows in flight: their task failed on RemoteCallError, and Spark
    # ran it again (the log of the driver says so).
    assert lost and "RemoteCallError" in run.stderr


def test_a_hung_server_at_most_once_gives_timeouts_not_wrong_rows(
        cluster: StandaloneCluster, shipped: tuple[Path, Path], fleet: Fleet,
        tmp_path: Path) -> None:
    run = faulted("stop, at most once, null, row", cluster, shipped, fleet, tmp_path,
                  mode="row", on_error="null", fault=signal.SIGSTOP)

    r = run.result
    assert "failed" not in r, run.stderr[-3000:]
    assert r["rows"] == ROWS and r["wrong"] == 0 and r["right"] + r["errors"] == ROWS
    assert r["timeout"] + r["send_failed"] == r["errors"]
    assert r["seconds"] < MAX_JOB_SECONDS
