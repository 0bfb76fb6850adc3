"""What a group promises when things go wrong, against a real broker: a handler that raises
gets its message again from the retry topic (reconsume_times 1, 2, ...) and then from the
dead-letter topic; orderly consumption keeps each queue's order while a second member joins;
a broker stopped in the middle of sends loses no send reported OK."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from remoting.rocketmq import (
    LitePullConsumer,
    Message,
    Producer,
    PushConsumer,
    SendFailedError,
)

from .cluster import RocketMQCluster

pytestmark = pytest.mark.default_io
WAIT = 90.0


def _until(condition: Callable[[], object], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition(), "not reached in time"


def test_a_failing_handler_gets_the_message_again_from_the_retry_topic_then_the_dlq(
        rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("retry", queues=1)
    group = rocketmq_cluster.new_group("r")
    deliveries: list[Message] = []

    def handler(message: Message) -> None:
        deliveries.append(message)
        raise RuntimeError("not today")

    with Producer(ns) as producer:
        sent = producer.send(topic, b"stubborn", tags="t", keys="k", properties={"p": "v"})
    with PushConsumer(ns, group, topic, handler=handler, consume_from="first",
                      retry_delay_level=1, max_reconsume_times=2) as consumer:
        _until(lambda: len(deliveries) >= 3)
        assert consumer.statistics().sent_back >= 3 or len(deliveries) == 3
        time.sleep(2)  # a 4th delivery would come within ~1 s
    assert [m.reconsume_times for m in deliveries] == [0, 1, 2]
    assert {m.msg_id for m in deliveries} == {sent.msg_id}  # the same id each time
    assert all(m.topic == topic and m.body == b"stubborn" and m.tags == "t"
               and m.properties["p"] == "v" for m in deliveries)
    # past max_reconsume_times the broker put it in the group's dead-letter topic
    with LitePullConsumer(ns, rocketmq_cluster.new_group("dlq"), f"%DLQ%{group}",
                          consume_from="first") as dlq:
        dead: list[Message] = []

        def some_dead() -> bool:
            dead.extend(dlq.poll(1.0))
            return bool(dead)

        _until(some_dead)
    assert [m.msg_id for m in dead] == [sent.msg_id] and dead[0].body == b"stubborn"


def test_orderly_consumption_keeps_each_keys_order_while_a_member_joins(
        rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("orderly", queues=4)
    group = rocketmq_cluster.new_group("o")
    keys, per_key = 8, 40
    handled: list[tuple[str, str, int]] = []  # (member, key, seq) in handling order
    lock = threading.Lock()

    def member(name: str) -> object:
        def handle(message: Message) -> None:
            key, seq = message.body.decode().split(":")
            with lock:
                handled.append((name, key, int(seq)))
            time.sleep(0.005)  # slow enough that the join lands mid-stream
        return handle

    with Producer(ns) as producer:
        for seq in range(per_key):
            for k in range(keys):
                producer.send(topic, f"key{k}:{seq}".encode(), sharding_key=f"key{k}")
    with PushConsumer(ns, group, topic, handler=member("a"), orderly=True,  # type: ignore[arg-type]
                      consume_from="first") as a:
        _until(lambda: len(handled) >= keys * per_key // 5)
        with PushConsumer(ns, group, topic, handler=member("b"), orderly=True,  # type: ignore[arg-type]
                          consume_from="first") as b:
            _until(lambda: len(handled) >= keys * per_key)
            time.sleep(0.5)
            shares = (a.assignment(), b.assignment())
    assert shares[0] and shares[1] and not set(shares[0]) & set(shares[1])
    by_key: dict[str, list[int]] = defaultdict(list)
    for _, key, seq in handled:
        by_key[key].append(seq)
    assert {k: v for k, v in by_key.items() if v != list(range(per_key))} == {}
    assert {m for m, _, _ in handled} == {"a", "b"}  # the queues moved to the new member


def test_a_broker_stopped_mid_send_loses_no_send_reported_ok(
        rocketmq_two_brokers: RocketMQCluster) -> None:
    cluster = rocketmq_two_brokers
    ns = cluster.name_servers
    topic = cluster.new_topic("failover", queues=4)
    victim = cluster.broker("broker-b")
    ok: dict[str, str] = {}  # msg id -> broker
    failed: list[BaseException] = []
    stop_sending = threading.Event()

    def send_loop() -> None:
        with Producer(ns, timeout=5.0) as producer:
            i = 0
            while not stop_sending.is_set():
                try:
                    result = producer.send(topic, b"%d" % i)
                    ok[result.msg_id] = result.broker_name
                except SendFailedError as exc:
                    failed.append(exc)
                i += 1

    sender = threading.Thread(target=send_loop)
    sender.start()
    try:
        _until(lambda: len(ok) >= 200 and "broker-b" in ok.values())
        victim.stop()  # SIGTERM: it unregisters and closes its connections
        before = len(ok)
        _until(lambda: len(ok) >= before + 300)
    finally:
        stop_sending.set()
        sender.join(WAIT)  # a send and the producer's shutdown are bounded: far less
    assert not sender.is_alive(), "the send loop has not ended: a send or shutdown hangs"
    after_stop = list(ok.values())[before:]
    assert after_stop.count("broker-a") >= 250  # the producer moved to the live broker
    victim.restart()
    got: set[str] = set()
    lock = threading.Lock()

    def collect(message: Message) -> None:
        with lock:
            got.add(message.msg_id)

    with PushConsumer(ns, cluster.new_group("f"), topic, handler=collect,
                      consume_from="first"):
        _until(lambda: set(ok) <= got, timeout=120)
    assert set(ok) <= got  # every send reported OK was stored and is delivered
    print(f"\nfailover: {len(ok)} sends OK, {len(failed)} failed while broker-b stopped")
