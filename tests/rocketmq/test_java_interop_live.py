"""Ours and Java's own 4.9.8 client on one broker, both ways: 10,000 messages with tags, keys
and properties sent by ours arrive once at Java's consumer with the same ids, tags, keys and
properties (and compressed bodies decompressed); 10,000 sent by Java (some over 4 KiB, so
compressed) arrive once at ours, bodies identical; and a group mixing both shares queues."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest

from remoting.rocketmq import Message, Producer, PushConsumer

from .cluster import RocketMQCluster
from .java_peer import JavaPeer, peer_body

pytestmark = pytest.mark.default_io
N = 10_000
WAIT = 240.0


def test_ours_sends_java_receives_each_once_with_the_same_fields(
        rocketmq_cluster: RocketMQCluster, java_peer: JavaPeer) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("py2java")
    sent: dict[str, tuple[str, list[str], dict[str, str], bytes]] = {}
    with Producer(ns, group=rocketmq_cluster.new_group("pyp")) as producer:
        for i in range(N):
            tags = f"tag{i % 3}"
            keys = [f"k{i}", f"order-{i % 7}"]
            props = {"index": str(i), "color": ("red", "green")[i % 2]}
            body = (b"%d:" % i) * (1000 if i % 50 == 0 else 5)  # large: most over 4 KiB
            result = producer.send(topic, body, tags=tags, keys=keys, properties=props)
            sent[result.msg_id] = (tags, keys, props, body)
    received = java_peer.consume(ns, topic, rocketmq_cluster.new_group("javac"), N,
                                 timeout=WAIT, linger=2.0)
    ids = [r["msg_id"] for r in received]
    assert len(ids) == N and set(ids) == set(sent)  # each once, Java prints our ids
    for record in received:
        tags, keys, props, body = sent[record["msg_id"]]
        assert record["tags"] == tags
        assert record["keys"] == " ".join(keys)
        assert record["user_properties"] == props
        assert record["body_sha256"] == hashlib.sha256(body).hexdigest()
        assert record["reconsume_times"] == 0
    compressed = {r["msg_id"] for r in received if r["sys_flag"] & 0x1}
    # Java read our zlib bodies (sysFlag as Java sets it): those of 4 KiB or more
    assert compressed == {i for i, v in sent.items() if len(v[3]) >= 4096}
    assert len(compressed) > 100


def test_java_sends_ours_receives_each_once_bodies_identical(
        rocketmq_cluster: RocketMQCluster, java_peer: JavaPeer) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("java2py")
    run_id = f"j{time.time_ns()}"
    sizes = (100, 5000, 300, 20_000)  # 5000 and 20,000: compressed by Java's producer
    sent = java_peer.produce(ns, topic, N, sizes=sizes, tags=("a", "b"), key_prefix="jk",
                             keys_per_message=2, properties={"origin": "java"}, run_id=run_id)
    assert len(sent) == N and all(r["status"] == "SEND_OK" for r in sent)
    got: dict[str, list[Message]] = {}
    lock = threading.Lock()
    everything = threading.Event()

    def handler(message: Message) -> None:
        with lock:
            got.setdefault(message.msg_id, []).append(message)
            if len(got) == N:
                everything.set()

    with PushConsumer(ns, rocketmq_cluster.new_group("pyc"), topic, handler=handler,
                      consume_from="first"):
        assert everything.wait(WAIT), f"{len(got)} of {N}"
        time.sleep(2)  # duplicates would show now
    assert set(got) == {r["msg_id"] for r in sent}
    assert all(len(v) == 1 for v in got.values())
    by_id = {r["msg_id"]: r for r in sent}
    for msg_id, (message,) in got.items():
        record = by_id[msg_id]
        i = record["index"]
        assert message.body == peer_body(run_id, i, sizes[i % len(sizes)])
        assert message.tags == ("a", "b")[i % 2]
        assert message.keys == [f"jk-{i}", f"jk-{i}-1"] or message.keys == record["keys"].split()
        assert message.properties["origin"] == "java"
        assert message.offset_msg_id == record["offset_msg_id"]
    assert sum(1 for (m,) in got.values() if m.sys_flag & 0x1) == N // 2


def test_java_and_ours_share_a_groups_queues(rocketmq_cluster: RocketMQCluster,
                                             java_peer: JavaPeer) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("mixed", queues=4)
    group = rocketmq_cluster.new_group("mixed")
    ours: list[Message] = []
    with PushConsumer(ns, group, topic, handler=ours.append, consume_from="first") as consumer:
        java = java_peer.start_consume(ns, topic, group, 10_000, timeout=30.0)
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) != 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(consumer.assignment()) == 2  # averagely: two queues each, as Java counts
        with Producer(ns) as producer:
            sent = {producer.send(topic, b"%d" % i).msg_id for i in range(200)}
        theirs = {r["msg_id"] for r in java.messages()}  # it stops after its 30 s
    mine = {m.msg_id for m in ours}
    assert mine and theirs and not mine & theirs  # each message to one member
    assert mine | theirs == sent
