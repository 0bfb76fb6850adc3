"""Streaming over the queue service on a real Spark standalone cluster: the executors (packed
virtualenv and code zip, as for the UDFs) read their offset ranges from a queue service in
this process. 50,000 messages into a Parquet file sink, stopped after two batches and
restarted from the checkpoint: every offset once, every trigger bounded; the sink's batch
run again publishes nothing twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.queue import QueueClient, QueueService
from tests.processes import ROOT

from .conftest import JOB_TIMEOUT

if TYPE_CHECKING:
    from .standalone import StandaloneCluster

# here too, not only by the conftest: the marker must be known when tests are generated
# (tests/conftest.py runs cluster tests on the default io only)
pytestmark = pytest.mark.cluster

MESSAGES = 50_000
PER_TRIGGER = 5_000


def test_a_stream_is_read_once_and_published_once_on_a_standalone_cluster(
        cluster: StandaloneCluster, shipped: tuple[Path, Path], tmp_path: Path) -> None:
    service = QueueService(memory_messages=2 * MESSAGES + 10_000)
    server = RemotingServer(ServerConfig(listen_port=0))
    service.attach(server)
    server.start()
    env_archive, code = shipped
    result_file = tmp_path / "result.json"
    # A Python data source is planned by a Python worker on the driver, started with the
    # executors' interpreter path (./environment/bin/python): the driver's own environment
    # must be found there too (docs/spark.md, Streaming on a cluster).
    (tmp_path / "environment").symlink_to(sys.prefix, target_is_directory=True)
    try:
        with RemotingClient() as client:
            q = QueueClient(client)
            for start in range(0, MESSAGES, 5_000):
                q.publish_many(server.addr, "events",
                               [b"%d" % i for i in range(start, start + 5_000)])
            done = subprocess.run(
                [sys.executable, "-m", "tests.cluster.stream_job", "--master",
                 cluster.master_url, "--queue", server.addr, "--per-trigger",
                 str(PER_TRIGGER), "--env", str(env_archive), "--code", str(code), "--work",
                 str(tmp_path), "--result", str(result_file)],
                cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT),
                                   SPARK_LOCAL_IP="127.0.0.1"),
                capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False)
            result = json.loads(result_file.read_text())
            assert "failed" not in result, result.get("failed", "") + done.stderr[-3000:]
            out = q.statistics(server.addr, "out").topics["out"]
    finally:
        server.shutdown()

    once = result["exactly_once"]
    assert (once["rows"], once["distinct_offsets"], once["bad"]) == (MESSAGES, MESSAGES, 0)
    assert max(once["triggers"]) <= PER_TRIGGER and sum(once["triggers"]) >= MESSAGES
    assert once["resumed_at"] >= 2  # the restart went on from the checkpoint
    sink = result["sink"]
    assert sink["rerun_batches"] == [sink["last"]]
    assert out.end == MESSAGES and out.duplicates >= 1
