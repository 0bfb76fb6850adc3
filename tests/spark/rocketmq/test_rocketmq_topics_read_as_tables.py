"""RocketMQ topics read by Spark (``format("rocketmq")``) from a real 4.9.8 broker: what Java's
own producer sent arrives with its tags, keys, properties and (compressed) bodies; a tag
expression; offsets given as JSON and ranges split into ``minPartitions``; a stream's
triggers of ``maxMessagesPerTrigger`` exactly with ``Trigger.AvailableNow``, its progress
committed to a consumer group; queues added to a topic while a query runs are read."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from remoting.rocketmq import Outgoing, Producer
from tests.rocketmq.cluster import RocketMQCluster
from tests.rocketmq.java_peer import JavaPeer

from .conftest import send

QUERY_CONSUMER_OFFSET = 14  # RequestCode
JAVA_MESSAGES = 60


def reader(spark: Any, ns: str, topic: str, **options: str) -> Any:
    read = spark.read.format("rocketmq").option("nameServers", ns).option("topic", topic)
    for key, value in options.items():
        read = read.option(key, value)
    return read.load()


def test_java_producers_messages_arrive_with_tags_keys_properties_and_bodies(
        streaming: Any, rocketmq_cluster: RocketMQCluster, java_peer: JavaPeer) -> None:
    ns = rocketmq_cluster.namesrv_addr
    topic = rocketmq_cluster.new_topic("spark-java", queues=2)
    sent = java_peer.produce(ns, topic, JAVA_MESSAGES, sizes=(100, 5000), tags=("a", "b"),
                             key_prefix="jk", keys_per_message=2,
                             properties={"region": "eu", "tier": "gold"})
    assert all(r["status"] == "SEND_OK" for r in sent)

    rows = {r.msg_id: r for r in reader(streaming, ns, topic).collect()}

    assert rows.keys() == {r["msg_id"] for r in sent}
    for record in sent:
        row = rows[record["msg_id"]]
        assert (row.topic, row.broker_name) == (topic, record["broker"])
        assert (row.queue_id, row.queue_offset) == (record["queue_id"], record["queue_offset"])
        assert row.tags == record["tags"]
        assert row.keys == record["keys"].split()
        assert {k: row.properties[k] for k in ("region", "tier")} == {"region": "eu",
                                                                      "tier": "gold"}
        assert hashlib.sha256(row.body).hexdigest() == record["body_sha256"]  # inflated
        assert len(row.body) == record["body_length"]
        assert row.store_timestamp >= row.born_timestamp
    assert sum(len(r.body) >= 4096 for r in rows.values()) == JAVA_MESSAGES // 2

    only_a = reader(streaming, ns, topic, expression="a").collect()
    assert sorted(r.msg_id for r in only_a) == sorted(
        r["msg_id"] for r in sent if r["tags"] == "a")


def test_a_batch_read_takes_json_offsets_and_splits_ranges_into_min_partitions(
        streaming: Any, rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.namesrv_addr
    topic = rocketmq_cluster.new_topic("spark-json", queues=2)
    send(ns, topic, 400, batch=100)  # 200 a queue: batches go to the queues in turn

    df = reader(streaming, ns, topic, startingOffsets='{"broker-a": {"0": 50}}',
                endingOffsets=json.dumps({topic: {"broker-a": {"0": 150, "1": -1}}}),
                minPartitions="3")

    assert df.rdd.getNumPartitions() == 3
    got = df.selectExpr("queue_id", "queue_offset").collect()
    assert sorted((r.queue_id, r.queue_offset) for r in got) == (
        [(0, o) for o in range(50, 150)] + [(1, o) for o in range(200)])


def committed(cluster: RocketMQCluster, group: str, topic: str, queue_id: int) -> int:
    reply = cluster.request(cluster.brokers[0].addr, QUERY_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id)})
    return int((reply.ext_fields or {}).get("offset") or -1) if reply.code == 0 else -1


def test_a_streams_triggers_are_exact_and_its_progress_is_committed_to_its_group(
        streaming: Any, rocketmq_cluster: RocketMQCluster, tmp_path: Path) -> None:
    ns = rocketmq_cluster.namesrv_addr
    topic = rocketmq_cluster.new_topic("spark-group", queues=4)
    group = rocketmq_cluster.new_group("spark-lag")
    send(ns, topic, 2_000, batch=100)

    query = (streaming.readStream.format("rocketmq").option("nameServers", ns)
             .option("topic", topic).option("startingOffsets", "earliest")
             .option("maxMessagesPerTrigger", "300").option("group", group).load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(300)
    assert query.exception() is None

    sizes = [p.numInputRows for p in query.recentProgress if p.numInputRows]
    assert sizes == [300] * 6 + [200]
    lag_free = sum(committed(rocketmq_cluster, group, topic, q) for q in range(4))
    # Spark commits a batch to the source when it plans the next: the last may trail
    assert 2_000 - 300 <= lag_free <= 2_000


def test_queues_added_to_a_topic_while_a_query_runs_are_read_from_their_start(
        streaming: Any, rocketmq_cluster: RocketMQCluster, tmp_path: Path) -> None:
    ns = rocketmq_cluster.namesrv_addr
    topic = rocketmq_cluster.new_topic("spark-grow", queues=2)
    send(ns, topic, 100, batch=50)
    query = (streaming.readStream.format("rocketmq").option("nameServers", ns)
             .option("topic", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("memory").queryName("grown")
             .option("checkpointLocation", str(tmp_path)).start())
    try:
        query.processAllAvailable()
        rocketmq_cluster.create_topic(topic, queues=4)  # the route grows to 4 queues
        with Producer(ns, "spark-tests-grow") as producer:  # a new producer: the new route
            for i in range(100, 180, 20):
                producer.send_batch(topic, [Outgoing(b"%d" % j) for j in range(i, i + 20)])
        query.processAllAvailable()
        got = streaming.sql("SELECT queue_id, CAST(body AS STRING) AS n FROM grown").collect()
    finally:
        query.stop()
    assert sorted(int(r.n) for r in got) == list(range(180))
    assert {r.queue_id for r in got} == {0, 1, 2, 3}
