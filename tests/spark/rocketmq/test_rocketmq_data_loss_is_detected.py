"""Data loss in a real 4.9.8 broker, as Spark's Kafka source reports it: a stream reads part of
a queue and stops; the broker then deletes the commit log files holding the next offsets (1
MiB files, ``fileReservedTime=0``, deletion every hour of the day); the query restarted from
its checkpoint fails naming the offsets gone (``failOnDataLoss``, the default), and restarted
with ``failOnDataLoss=false`` it skips them and reads the rest, each message once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codec import RequestCode
from remoting.rocketmq import Outgoing, Producer
from tests.rocketmq.cluster import RocketMQCluster

pytestmark = [pytest.mark.rocketmq, pytest.mark.spark]

FIRST, LATER = 200, 3_000  # messages before the first query stops, and after
BODY_BYTES = 1_000  # ~3 MiB sent later: 3 commit log files of 1 MiB deleted, the last kept
# seconds for the broker to delete them: it looks every 0.5 s, the first time a minute after
# it started
DELETION_TIMEOUT = 240.0
LOSSY = {"mappedFileSizeCommitLog": str(1024 * 1024), "fileReservedTime": "0",
         "deleteWhen": ";".join(f"{hour:02d}" for hour in range(24)),
         "cleanResourceInterval": "500"}


@pytest.fixture(scope="module")
def lossy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    """A broker that deletes every commit log file but the one being written."""
    with RocketMQCluster(run_dir=tmp_path_factory.mktemp("rocketmq-lossy"),
                         broker_conf=LOSSY) as cluster:
        yield cluster


def send(ns: str, topic: str, first: int, count: int) -> None:
    with Producer(ns, "spark-tests-lossy") as producer:
        for start in range(first, first + count, 100):
            producer.send_batch(topic, [Outgoing(b"%d " % i + b"x" * BODY_BYTES)
                                        for i in range(start, min(first + count, start + 100))])


def minimum(cluster: RocketMQCluster, topic: str) -> int:
    reply = cluster.request(cluster.brokers[0].addr, RequestCode.GET_MIN_OFFSET,
                            {"topic": topic, "queueId": "0"})
    assert reply.code == 0, reply.remark
    return int((reply.ext_fields or {}).get("offset") or -1)


def wait_for_deletion(cluster: RocketMQCluster, topic: str) -> int:
    """Wait until the broker kept only the commit log file it writes (and the next one, made
    ahead of time); return the queue's first offset then."""
    commitlog = cluster.run_dir / f"store-{cluster.brokers[0].name}" / "commitlog"
    deadline = time.monotonic() + DELETION_TIMEOUT
    while time.monotonic() < deadline:
        if len(list(commitlog.iterdir())) <= 2 and (first := minimum(cluster, topic)) > FIRST:
            return first
        time.sleep(0.2)  # the broker's clean-up thread runs on its own clock
    raise AssertionError(f"the broker kept {sorted(p.name for p in commitlog.iterdir())} "
                         f"for {DELETION_TIMEOUT:.0f} s (queue minimum "
                         f"{minimum(cluster, topic)})")


def test_offsets_deleted_before_the_query_read_them_fail_it_or_are_skipped(
        streaming: Any, lossy_cluster: RocketMQCluster, tmp_path: Path) -> None:
    from pyspark.errors import StreamingQueryException

    ns = lossy_cluster.namesrv_addr
    topic = lossy_cluster.new_topic("spark-lost", queues=1)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"

    def run(fail_on_data_loss: str) -> Any:
        query = (streaming.readStream.format("rocketmq").option("nameServers", ns)
                 .option("topic", topic).option("startingOffsets", "earliest")
                 .option("failOnDataLoss", fail_on_data_loss).load()
                 .writeStream.format("parquet").option("path", str(output))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(300), "the query did not finish"
        return query

    send(ns, topic, 0, FIRST)
    assert run("true").exception() is None
    send(ns, topic, FIRST, LATER)
    first_kept = wait_for_deletion(lossy_cluster, topic)

    with pytest.raises(StreamingQueryException,
                       match=f"queue 0 of topic '{topic}' on broker-a: offsets {FIRST} to "
                             f"{first_kept - 1}, which the query has not read, are gone"):
        run("true")
    assert run("false").exception() is None

    got = streaming.read.parquet(str(output)).selectExpr(
        "queue_offset", "CAST(split(CAST(body AS STRING), ' ')[0] AS LONG) AS n").collect()
    kept = list(range(FIRST)) + list(range(first_kept, FIRST + LATER))
    assert sorted(r.n for r in got) == kept  # each message once, those deleted skipped
    assert all(r.queue_offset == r.n for r in got)
