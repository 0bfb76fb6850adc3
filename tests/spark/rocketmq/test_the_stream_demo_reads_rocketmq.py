"""``remoting demo --stream --source rocketmq`` against a real 4.9.8 broker: every message
scored once, a line per trigger, exit 0; without a broker it says what to start, before
Spark starts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rocketmq.cluster import RocketMQCluster
from tests.spark.test_demo import AS_INSTALLED


def test_the_stream_demo_reads_a_rocketmq_topic_and_scores_every_message_once(
        rocketmq_cluster: RocketMQCluster, tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)

    done = subprocess.run(
        [sys.executable, "-c", AS_INSTALLED, "demo", "--stream", "--source", "rocketmq",
         "--name-servers", rocketmq_cluster.namesrv_addr, "--rows", "20000",
         "--partitions", "2", "--output", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)

    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert f"RocketMQ at {rocketmq_cluster.namesrv_addr}, topic demo-events-" in done.stdout
    triggers = [line.split() for line in done.stdout.splitlines()
                if line.startswith("trigger")]
    rows = [int(t[2].replace(",", "")) for t in triggers]
    assert len(triggers) >= 2 and max(rows) <= 2_000 and sum(rows) == 20_000
    assert int(triggers[-1][7].replace(",", "")) == 0  # caught up at the end
    assert "20,000 rows in" in done.stdout and "20,000 distinct offsets" in done.stdout
    assert "wrong scores: 0" in done.stdout


@pytest.mark.spark
def test_the_demo_says_when_no_rocketmq_answers_before_spark_starts(tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        nobody = f"127.0.0.1:{unused.getsockname()[1]}"
        done = subprocess.run(
            [sys.executable, "-c", AS_INSTALLED, "demo", "--stream", "--source", "rocketmq",
             "--name-servers", nobody, "--rows", "1000", "--partitions", "1",
             "--output", str(tmp_path)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert f"could not send to RocketMQ at {nobody}" in done.stderr
    assert "give --name-servers" in done.stderr
    assert "Spark" not in done.stderr.split("could not send")[0]  # it had not started
