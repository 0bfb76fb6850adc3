"""Streaming over a real RocketMQ 4.9.8 broker on a real Spark standalone cluster: the
executors (packed virtualenv and code zip, as for the UDFs) pull their offset ranges from
the broker. 20,000 messages on four queues into a Parquet file sink, stopped after two
batches and restarted from the checkpoint: every (broker, queue, offset) once, every trigger
bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.processes import ROOT
from tests.rocketmq.cluster import RocketMQCluster
from tests.spark.rocketmq.conftest import send

from .conftest import JOB_TIMEOUT

if TYPE_CHECKING:
    from .standalone import StandaloneCluster

pytestmark = pytest.mark.cluster

MESSAGES = 20_000
PER_TRIGGER = 4_000


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    with RocketMQCluster(brokers=1, run_dir=tmp_path_factory.mktemp("rocketmq")) as cluster:
        yield cluster


def test_a_rocketmq_stream_is_read_once_on_a_standalone_cluster(
        cluster: StandaloneCluster, shipped: tuple[Path, Path], broker: RocketMQCluster,
        tmp_path: Path) -> None:
    name_servers = broker.namesrv_addr
    topic = broker.new_topic("cluster-stream", queues=4)
    send(name_servers, topic, MESSAGES)
    env_archive, code = shipped
    result_file = tmp_path / "result.json"
    # the driver's Python worker plans the source with the executors' interpreter path
    # (./environment/bin/python): the driver's own environment must be found there too
    (tmp_path / "environment").symlink_to(sys.prefix, target_is_directory=True)
    done = subprocess.run(
        [sys.executable, "-m", "tests.cluster.stream_job", "--master",
         cluster.master_url, "--name-servers", name_servers, "--topic", topic,
         "--per-trigger", str(PER_TRIGGER), "--env", str(env_archive), "--code", str(code),
         "--work", str(tmp_path), "--result", str(result_file)],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1"),
        capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False)
    result = json.loads(result_file.read_text())
    assert "failed" not in result, result.get("failed", "") + done.stderr[-3000:]

    once = result["exactly_once"]
    assert (once["rows"], once["positions"], once["bodies"], once["bad"]) == (
        MESSAGES, MESSAGES, MESSAGES, 0)
    assert max(once["triggers"]) <= PER_TRIGGER and sum(once["triggers"]) >= MESSAGES
    assert once["resumed_at"] >= 2  # the restart went on from the checkpoint
