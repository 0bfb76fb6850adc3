"""The ``rocketmq`` sink against a real 4.9.8 broker: a DataFrame written with ``df.write``
(bodies, tags, keys, properties, a topic column routing rows to two topics) and a stream
written with ``writeStream`` arrive whole, each row once with its own ``spark_key`` (no
duplicates without a failure); wrong columns are refused before anything is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.rocketmq.cluster import RocketMQCluster

from .conftest import send

ROWS = 3_000


def read_back(spark: Any, ns: str, topics: str) -> Any:
    return (spark.read.format("rocketmq").option("nameServers", ns).option("topic", topics)
            .load())


def test_a_dataframe_written_arrives_whole_with_its_columns_and_topics(
        streaming: Any, rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.namesrv_addr
    even, odd = (rocketmq_cluster.new_topic("spark-sink-even", queues=2),
                 rocketmq_cluster.new_topic("spark-sink-odd", queues=2))
    df = streaming.range(ROWS, numPartitions=3).selectExpr(
        "CAST(id AS STRING) AS body",
        f"IF(id % 2 = 0, '{even}', '{odd}') AS topic",
        "IF(id % 3 = 0, 'third', NULL) AS tags",
        "array(concat('k', CAST(id AS STRING)), 'shared') AS keys",
        "map('n', CAST(id AS STRING), 'origin', 'spark') AS properties")

    (df.write.format("rocketmq").option("nameServers", ns).option("batchMessages", "100")
     .mode("append").save())

    back = read_back(streaming, ns, f"{even},{odd}")
    rows = back.selectExpr(
        "count(*) AS n", "count(DISTINCT properties['spark_key']) AS keys",
        "count(DISTINCT CAST(body AS STRING)) AS bodies",
        f"sum(IF((topic = '{even}') = (CAST(CAST(body AS STRING) AS LONG) % 2 = 0), 0, 1)) "
        "AS misrouted",
        "sum(IF(properties['n'] = CAST(body AS STRING) AND properties['origin'] = 'spark'"
        "       AND keys = array(concat('k', CAST(body AS STRING)), 'shared'), 0, 1)) AS wrong",
        "sum(IF(CAST(CAST(body AS STRING) AS LONG) % 3 = 0, IF(tags = 'third', 0, 1),"
        "       IF(tags IS NULL, 0, 1))) AS mistagged").first()
    assert (rows.n, rows.keys, rows.bodies) == (ROWS, ROWS, ROWS)
    assert (rows.misrouted, rows.wrong, rows.mistagged) == (0, 0, 0)


def test_a_stream_written_arrives_whole_each_row_once(
        streaming: Any, rocketmq_cluster: RocketMQCluster, tmp_path: Path) -> None:
    ns = rocketmq_cluster.namesrv_addr
    source = rocketmq_cluster.new_topic("spark-pipe-in", queues=4)
    target = rocketmq_cluster.new_topic("spark-pipe-out", queues=4)
    send(ns, source, ROWS)

    query = (streaming.readStream.format("rocketmq").option("nameServers", ns)
             .option("topic", source).option("startingOffsets", "earliest")
             .option("maxMessagesPerTrigger", "1000").load()
             .selectExpr("body", "keys", "map('from', msg_id) AS properties")
             .writeStream.format("rocketmq").option("nameServers", ns).option("topic", target)
             .option("checkpointLocation", str(tmp_path)).trigger(availableNow=True).start())
    assert query.awaitTermination(300)
    assert query.exception() is None

    back = read_back(streaming, ns, target)
    rows = back.selectExpr(
        "count(*) AS n", "count(DISTINCT properties['spark_key']) AS keys",
        "count(DISTINCT properties['from']) AS sources",
        "count(DISTINCT CAST(body AS STRING)) AS bodies").first()
    assert (rows.n, rows.keys, rows.sources, rows.bodies) == (ROWS,) * 4
    key = back.select("properties").first().properties["spark_key"]
    query_id, batch, partition, row = key.split("/")
    assert query_id == str(query.id) and batch.isdigit() and partition.isdigit()


def test_columns_the_sink_cannot_send_are_refused_before_anything_is_sent(
        streaming: Any, rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.namesrv_addr
    topic = rocketmq_cluster.new_topic("spark-sink-bad", queues=1)
    bad = streaming.range(3).selectExpr("CAST(id AS STRING) AS body", "id AS extra")
    with pytest.raises(Exception, match="the rocketmq sink writes a column body"):
        bad.write.format("rocketmq").option("nameServers", ns).option("topic", topic) \
            .mode("append").save()
    no_topic = streaming.range(3).selectExpr("CAST(id AS STRING) AS body")
    with pytest.raises(Exception, match="needs option topic, or a column topic"):
        no_topic.write.format("rocketmq").option("nameServers", ns).mode("append").save()
    assert read_back(streaming, ns, topic).count() == 0
