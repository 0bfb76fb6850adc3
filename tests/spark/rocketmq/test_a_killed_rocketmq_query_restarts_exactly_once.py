"""50,000 messages of a real RocketMQ topic (4 queues) through a streaming query into a
Parquet file sink: the query, in a process of its own, is SIGKILLed after some triggers and
restarted from its checkpoint (in this process, ``Trigger.AvailableNow``): every (queue,
offset) is in the output exactly once, each message with its own body, and each trigger read
at most ``maxMessagesPerTrigger``."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from tests.processes import Proc
from tests.rocketmq.cluster import RocketMQCluster

from .conftest import send

MESSAGES = 50_000
PER_TRIGGER = 5_000


def test_every_queue_offset_is_in_the_output_once_after_a_kill_and_a_restart(
        streaming: Any, rocketmq_cluster: RocketMQCluster, tmp_path: Path) -> None:
    topic = rocketmq_cluster.new_topic("spark-kill", queues=4)
    ns = rocketmq_cluster.namesrv_addr
    send(ns, topic, MESSAGES)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"

    first = Proc(ns, topic, str(checkpoint), str(output), str(PER_TRIGGER),
                 module="tests.spark.rocketmq.stream_job")
    try:
        before = first.expect_all(r"batch (\d+) (\d+)", count=3, timeout=240)
    finally:
        os.kill(first.popen.pid, signal.SIGKILL)  # the driver, mid-stream
        first.stop()
    killed_at = int(before[-1].group(1))

    query = (streaming.readStream.format("rocketmq").option("nameServers", ns)
             .option("topic", topic).option("startingOffsets", "earliest")
             .option("maxMessagesPerTrigger", str(PER_TRIGGER)).load()
             .writeStream.format("parquet").option("path", str(output))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(300), "the restarted query did not finish"
    assert query.exception() is None

    out = streaming.read.parquet(str(output))
    rows = out.selectExpr(
        "count(*) AS n", "count(DISTINCT queue_id, queue_offset) AS distinct_places",
        "count(DISTINCT CAST(body AS STRING)) AS distinct_bodies",
        "min(CAST(CAST(body AS STRING) AS LONG)) AS low",
        "max(CAST(CAST(body AS STRING) AS LONG)) AS high",
        "count(DISTINCT queue_id) AS queues",
        "sum(CASE WHEN keys[0] = concat('k', CAST(body AS STRING)) THEN 0 ELSE 1 END) "
        "AS foreign").first()
    assert (rows.n, rows.distinct_places, rows.distinct_bodies) == (MESSAGES,) * 3
    assert (rows.low, rows.high, rows.queues, rows.foreign) == (0, MESSAGES - 1, 4, 0)
    after = [json.loads(p.json) for p in query.recentProgress]
    assert after[0]["batchId"] > killed_at  # resumed, not started over
    sizes = [int(b.group(2)) for b in before] + [p["numInputRows"] for p in after]
    assert max(sizes) <= PER_TRIGGER and sum(sizes) >= MESSAGES - PER_TRIGGER
    ends = after[-1]["sources"][0]["endOffset"][topic]["broker-a"]
    assert sum(ends.values()) == MESSAGES
