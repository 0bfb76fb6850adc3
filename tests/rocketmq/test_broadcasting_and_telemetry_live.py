"""Broadcasting (every member gets every message, offsets in a local file that a restart
resumes from) and OpenTelemetry (a PRODUCER span per send whose context travels in the
message's properties to the CONSUMER span of its handler; sent and consumed counters)
against a real broker."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from remoting.rocketmq import Producer, PushConsumer
from tests.observability.conftest import Telemetry, otel  # noqa: F401 (the fixture)

from .clients import WAIT, Collector
from .cluster import RocketMQCluster

pytestmark = pytest.mark.default_io


def test_every_broadcasting_member_gets_every_message_and_resumes_from_its_file(
        rocketmq_cluster: RocketMQCluster, tmp_path: Path) -> None:
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("bcast", queues=2)
    group = rocketmq_cluster.new_group("b")
    with Producer(ns) as producer:
        first = {producer.send(topic, b"%d" % i).msg_id for i in range(10)}
        a, b = Collector(10), Collector(10)
        with PushConsumer(ns, group, topic, handler=a, broadcasting=True, consume_from="first",
                          offsets_dir=str(tmp_path / "a")) as ca, \
                PushConsumer(ns, group, topic, handler=b, broadcasting=True,
                             consume_from="first", offsets_dir=str(tmp_path / "b")) as cb:
            assert a.wait() and b.wait()
            assert len(ca.assignment()) == len(cb.assignment()) == 2  # each reads every queue
        assert {m.msg_id for m in a.messages} == {m.msg_id for m in b.messages} == first
        stored = json.loads((tmp_path / "a" / group / "offsets.json").read_text())
        assert sum(e["offset"] for e in stored["offsets"]) == 10
        later = {producer.send(topic, b"later %d" % i).msg_id for i in range(5)}
    again = Collector(5)
    with PushConsumer(ns, group, topic, handler=again, broadcasting=True, consume_from="first",
                      offsets_dir=str(tmp_path / "a")):
        again.wait()
        time.sleep(0.5)
    assert {m.msg_id for m in again.messages} == later  # from its file, not from the first


def test_a_send_and_its_handler_are_one_trace_and_are_counted(
        rocketmq_cluster: RocketMQCluster, otel: Telemetry) -> None:  # noqa: F811
    ns = rocketmq_cluster.name_servers
    topic = rocketmq_cluster.new_topic("otel", queues=1)
    config = otel.client_config()
    got = Collector(2)
    with Producer(ns, client_config=config) as producer:
        sent = producer.send(topic, b"traced", tags="t")
        producer.send_async(topic, b"async").result(WAIT)
    with PushConsumer(ns, rocketmq_cluster.new_group("o"), topic, handler=got,
                      consume_from="first", client_config=config):
        got.wait()
        time.sleep(0.3)
    producers = [s for s in otel.finished("PRODUCER") if s.name == f"send {topic}"]
    consumers = [s for s in otel.finished("CONSUMER") if s.name == f"process {topic}"]
    assert len(producers) == 2 and len(consumers) == 2
    traced = next(m for m in got.messages if m.msg_id == sent.msg_id)
    assert "traceparent" in traced.properties
    span = next(s for s in consumers
                if (s.attributes or {}).get("messaging.message.id") == sent.msg_id)
    sync_send = next(s for s in producers
                     if s.context.trace_id == span.context.trace_id)
    assert span.parent is not None and span.parent.span_id == sync_send.context.span_id
    assert span.attributes is not None and span.attributes["messaging.system"] == "rocketmq"
    # the transport's CLIENT span of the SEND_MESSAGE_V2 call nests under the PRODUCER span
    assert any(s.parent is not None and s.parent.span_id == sync_send.context.span_id
               for s in otel.finished("CLIENT"))
    sent_points = otel.points("messaging.client.sent.messages")
    consumed_points = otel.points("messaging.client.consumed.messages")
    assert sum(p.value for p in sent_points) == 2
    assert sum(p.value for p in consumed_points) == 2
    assert otel.points("messaging.process.duration")
