"""Several streaming queries of the ``rocketmq`` source, and restarts, on a real 4.9.8 broker:
each new query from ``earliest`` reads the whole topic (its start found once per query, however
often Spark asks), a restart reads only what is new, and without option ``group`` nothing is
committed to the group its pulls name; with ``group``, that one group follows its query."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from remoting.spark._streaming._rocketmq._options import DEFAULT_READER_GROUP
from tests.rocketmq.cluster import RocketMQCluster

from .conftest import send
from .test_rocketmq_topics_read_as_tables import committed


def run(streaming: Any, ns: str, topic: str, checkpoint: Path, **options: str) -> int:
    reader = (streaming.readStream.format("rocketmq").option("nameServers", ns)
              .option("topic", topic).option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", "150"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(300)
    assert query.exception() is None
    return sum(p["numInputRows"] for p in query.recentProgress)


def test_queries_and_restarts_read_what_is_theirs_and_commit_only_to_a_named_group(
        streaming: Any, rocketmq_cluster: RocketMQCluster, tmp_path: Path) -> None:
    ns = rocketmq_cluster.namesrv_addr
    topic = rocketmq_cluster.new_topic("spark-queries", queues=4)
    group = rocketmq_cluster.new_group("spark-named")
    send(ns, topic, 400, batch=100)

    rows = [run(streaming, ns, topic, tmp_path / name) for name in "ab"]
    rows.append(run(streaming, ns, topic, tmp_path / "g", group=group))
    send(ns, topic, 100, first=400, batch=100)
    rows += [run(streaming, ns, topic, tmp_path / "a"), run(streaming, ns, topic, tmp_path / "c"),
             run(streaming, ns, topic, tmp_path / "g", group=group)]

    assert rows == [400, 400, 400, 100, 500, 100]
    # the broker answers 0 for a group that never committed (its queues start at 0): the
    # pulls of six queries, 1,900 messages, moved nothing
    assert [committed(rocketmq_cluster, DEFAULT_READER_GROUP, topic, q) for q in range(4)] == [
        0] * 4
    # Spark commits a batch to the source when it plans the next: the last may trail
    assert 500 - 150 <= sum(committed(rocketmq_cluster, group, topic, q) for q in range(4)) <= 500
