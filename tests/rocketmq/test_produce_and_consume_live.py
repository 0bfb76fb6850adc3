"""A producer and both consumers against a real RocketMQ 4.9.8 broker, both faces: sends of
every kind arrive once with their ids, tags, keys and properties; tags are filtered; a held
pull hands a sent message to a waiting consumer; lite pull commits, seeks and assigns."""

from __future__ import annotations

import time

import pytest
import trio

from remoting.rocketmq import (
    LitePullConsumer,
    Message,
    MessageQueue,
    Outgoing,
    Producer,
    PushConsumer,
    SendStatus,
    open_lite_pull_consumer,
    open_producer,
    open_push_consumer,
)

from .clients import WAIT, Collector
from .cluster import RocketMQCluster

# the clients use the transport's default io (the thread driver) on purpose
pytestmark = pytest.mark.default_io


def test_every_kind_of_send_reaches_a_push_consumer_once_with_its_fields(
        rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("kinds")
    collector = Collector(7)
    with Producer(ns, group=rocketmq_cluster.new_group("p")) as producer:
        sent = [producer.send(topic, b"sync", tags="a", keys=["k1", "k2"],
                              properties={"color": "red"})]
        sent.append(producer.send(topic, b"z" * 10_000, tags="big"))  # compressed on the wire
        sent.append(producer.send_async(topic, b"async", tags="a").result(WAIT))
        batch = producer.send_batch(topic, [b"b1", Outgoing(b"b2", tags="other", keys="k3"),
                                            b"b3"], tags="batch")
        producer.send_oneway(topic, b"oneway", tags="ow")
        with PushConsumer(ns, rocketmq_cluster.new_group("c"), topic, handler=collector,
                          consume_from="first") as consumer:
            got = {m.msg_id: m for m in collector.wait()}
            time.sleep(0.5)  # anything more would arrive now
            assert consumer.statistics().consumed >= 7
    assert all(r.status is SendStatus.SEND_OK for r in sent)
    assert len(collector.messages) == 7 == len(got)
    first = got[sent[0].msg_id]
    assert (first.body, first.tags, first.keys, first.properties["color"]) == (
        b"sync", "a", ["k1", "k2"], "red")
    assert first.queue == MessageQueue(topic, "broker-a", sent[0].queue_id)
    assert first.queue_offset == sent[0].queue_offset and first.reconsume_times == 0
    assert got[sent[1].msg_id].body == b"z" * 10_000
    assert [got[i].body for i in batch.msg_ids] == [b"b1", b"b2", b"b3"]
    assert got[batch.msg_ids[1]].tags == "other" and got[batch.msg_ids[1]].keys == ["k3"]
    assert {m.body for m in got.values()} >= {b"async", b"oneway"}


def test_the_broker_filters_by_tag_expression_and_the_client_checks_again(
        rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("tags", queues=2)
    with Producer(ns) as producer:
        for i, tag in enumerate(["a", "b", "c", "a", "b", "c", None]):
            producer.send(topic, b"%d" % i, tags=tag)
    collector = Collector(4)
    with PushConsumer(ns, rocketmq_cluster.new_group("c"), topic, "a || b",
                      handler=collector, consume_from="first"):
        got = collector.wait()
        time.sleep(0.5)
    assert sorted((m.tags for m in collector.messages), key=str) == ["a", "a", "b", "b"]
    assert len(got) == 4


def test_a_held_pull_hands_a_sent_message_to_the_waiting_consumer(
        rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("held", queues=1)
    collector = Collector(1)
    with PushConsumer(ns, rocketmq_cluster.new_group("c"), topic, handler=collector,
                      suspend=30.0) as consumer, Producer(ns) as producer:
        # the first pull of the (empty) queue goes out at start and is held by the broker
        deadline = time.monotonic() + WAIT
        while consumer.statistics().pulls == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        pulls = consumer.statistics().pulls
        producer.send(topic, b"now")
        [message] = collector.wait()
        after = consumer.statistics()
    assert message.body == b"now"
    # the pull that was held answered with the message: no second pull was needed for it
    assert after.pulls == pulls + 1


def test_lite_pull_commits_what_poll_returned_and_seeks(
        rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("lite", queues=2)
    group = rocketmq_cluster.new_group("l")
    with Producer(ns) as producer:
        for i in range(20):
            producer.send(topic, b"%d" % i)
    with LitePullConsumer(ns, group, topic, consume_from="first", auto_commit=False) as c:
        got: list[Message] = []
        deadline = time.monotonic() + WAIT
        while len(got) < 20 and time.monotonic() < deadline:
            got += c.poll(1.0)
        assert sorted(int(m.body) for m in got) == list(range(20))
        queues = c.assignment()
        assert queues == [MessageQueue(topic, "broker-a", 0), MessageQueue(topic, "broker-a", 1)]
        assert [c.committed(q) for q in queues] == [-1, -1] or all(
            c.committed(q) in (-1, 0) for q in queues)
        c.commit()
        ends = {q: 1 + max(m.queue_offset for m in got if m.queue_id == q.queue_id)
                for q in queues}
        assert {q: c.committed(q) for q in queues} == ends
        c.seek(queues[0], 0)
        again: list[Message] = []
        while len(again) < ends[queues[0]] and time.monotonic() < deadline:
            again += c.poll(1.0)
        assert sorted(m.queue_offset for m in again) == list(range(ends[queues[0]]))
    with LitePullConsumer(ns, group, None, consume_from="first") as assigned:
        assigned.assign([queues[1]])
        assert assigned.poll(0.5) == []  # committed to its end: nothing left there
        assigned.seek(queues[1], 0)
        assert {m.queue_id for m in assigned.poll(WAIT)} == {1}


def test_the_trio_faces_send_and_consume(rocketmq_cluster: RocketMQCluster) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("trio", queues=2)

    async def main() -> None:
        got: list[Message] = []
        arrived = trio.Event()

        async def handler(message: Message) -> None:
            got.append(message)
            if len(got) == 3:
                arrived.set()

        async with open_producer(ns) as producer:
            result = await producer.send(topic, b"one", tags="t")
            future = await producer.send_async(topic, b"two")
            batch = await producer.send_batch(topic, [b"three"])
            assert (await future.wait()).status is SendStatus.SEND_OK
        async with open_push_consumer(ns, rocketmq_cluster.new_group("c"), topic,
                                      handler=handler, consume_from="first") as consumer:
            with trio.fail_after(WAIT):
                await arrived.wait()
            assert consumer.statistics().consumed == 3
        assert {m.body for m in got} == {b"one", b"two", b"three"}
        assert result.msg_id in {m.msg_id for m in got} and batch.msg_ids[0] in {
            m.msg_id for m in got}
        async with open_lite_pull_consumer(ns, rocketmq_cluster.new_group("l"), topic,
                                           consume_from="first") as lite:
            polled: list[Message] = []
            with trio.fail_after(WAIT):
                while len(polled) < 3:
                    polled += await lite.poll(1.0)
            await lite.commit()
            committed = [await lite.committed(q) for q in lite.assignment()]
            assert sum(max(0, c) for c in committed) == 3

    trio.run(main)


@pytest.mark.parametrize("face", ["blocking", "trio"])
def test_a_consumer_that_leaves_commits_and_the_group_resumes_there(
        rocketmq_cluster: RocketMQCluster, face: str) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("resume", queues=2)
    group = rocketmq_cluster.new_group("c")
    with Producer(ns) as producer:
        for i in range(30):
            producer.send(topic, b"%d" % i)
        first = Collector(30)
        if face == "blocking":
            with PushConsumer(ns, group, topic, handler=first, consume_from="first"):
                first.wait()
        else:
            async def run() -> None:
                async with open_push_consumer(ns, group, topic, handler=first,
                                              consume_from="first"):
                    await trio.to_thread.run_sync(first.wait)
            trio.run(run)
        for i in range(30, 40):
            producer.send(topic, b"%d" % i)
    second = Collector(10)
    with PushConsumer(ns, group, topic, handler=second, consume_from="first"):
        second.wait()
        time.sleep(0.5)
    assert sorted(int(m.body) for m in second.messages) == list(range(30, 40))
