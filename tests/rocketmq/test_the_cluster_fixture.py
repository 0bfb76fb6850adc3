"""The cluster fixtures start a real name server and brokers, create topics the name server
routes, and stop brokers the way failover tests need."""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from . import cluster as cluster_module
from .cluster import RocketMQCluster
from .java_peer import JavaPeer, peer_body


def _queues(route: dict[str, Any], broker: str) -> dict[str, Any]:
    [data] = [q for q in route["queueDatas"] if q["brokerName"] == broker]
    return dict(data)


def _brokers(route: dict[str, Any] | None) -> dict[str, str]:
    """{broker name: master address} of a route."""
    return {} if route is None else {
        b["brokerName"]: b["brokerAddrs"]["0"] for b in route["brokerDatas"]}


def test_a_new_topic_is_routed_to_the_broker_with_its_queues(
        rocketmq_cluster: RocketMQCluster) -> None:
    [broker] = rocketmq_cluster.brokers
    assert broker.name == "broker-a" and broker.alive() and broker.pid > 0
    topic = rocketmq_cluster.new_topic("fixture", queues=3)
    route = rocketmq_cluster.route(topic)
    assert route is not None
    assert _brokers(route) == {"broker-a": broker.addr}
    queues = _queues(route, "broker-a")
    assert (queues["readQueueNums"], queues["writeQueueNums"], queues["perm"]) == (3, 3, 6)
    assert rocketmq_cluster.namesrv_addr == ";".join(rocketmq_cluster.name_servers)
    assert (rocketmq_cluster.run_dir / "broker-0.pid").read_text().strip() == str(broker.pid)


def test_names_are_new_each_time_and_unknown_topics_have_no_route(
        rocketmq_cluster: RocketMQCluster) -> None:
    groups = {rocketmq_cluster.new_group() for _ in range(50)}
    assert len(groups) == 50 and all(g.startswith("g-") for g in groups)
    assert rocketmq_cluster.route(rocketmq_cluster.new_group("never-created")) is None
    with pytest.raises(ValueError, match="letters, digits"):
        rocketmq_cluster.new_topic("no spaces")


def test_two_brokers_both_appear_in_a_route(rocketmq_two_brokers: RocketMQCluster) -> None:
    a, b = rocketmq_two_brokers.brokers
    assert (a.name, b.name) == ("broker-a", "broker-b") and a.addr != b.addr
    topic = rocketmq_two_brokers.new_topic()
    route = rocketmq_two_brokers.route(topic)
    assert _brokers(route) == {"broker-a": a.addr, "broker-b": b.addr}
    assert route is not None and _queues(route, "broker-b")["writeQueueNums"] == 4


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_stopped_or_killed_broker_is_gone_from_the_route_until_restarted(
        rocketmq_two_brokers: RocketMQCluster, how: str) -> None:
    cluster = rocketmq_two_brokers
    topic = cluster.new_topic()
    b = cluster.broker("broker-b")
    try:
        getattr(b, how)()
        assert not b.alive() and b.pid == 0
        assert not (cluster.run_dir / "broker-1.pid").exists()
        with pytest.raises(ConnectionRefusedError), socket.create_connection(
                ("127.0.0.1", b.port), timeout=5):
            pass
        # stop: the broker unregisters itself; kill: the name server drops it when its
        # connection closes. Both at once, but the second by a thread of the name server.
        _wait_for(lambda: set(_brokers(cluster.route(topic))) == {"broker-a"})
    finally:
        b.restart()
    assert b.alive()
    _wait_for(lambda: set(_brokers(cluster.route(topic))) == {"broker-a", "broker-b"})


def _wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)  # polling the name server's state, another process's


def test_java_produces_and_consumes_through_the_cluster(
        rocketmq_cluster: RocketMQCluster, java_peer: JavaPeer) -> None:
    topic = rocketmq_cluster.new_topic("java")
    sent = java_peer.produce(rocketmq_cluster.name_servers, topic, 12, sizes=(100, 5000),
                             tags=("a", "b", ""), key_prefix="k", keys_per_message=2,
                             properties={"color": "blue", "größe": "ß"}, run_id="fixture")
    assert [r["status"] for r in sent] == ["SEND_OK"] * 12
    assert sent[1]["body_sha256"] == hashlib.sha256(peer_body("fixture", 1, 5000)).hexdigest()
    got = java_peer.consume(rocketmq_cluster.name_servers, topic,
                            rocketmq_cluster.new_group(), 12)
    by_id = {r["msg_id"]: r for r in got}
    assert len(by_id) == 12 == len(got)  # each message once
    for s in sent:
        r = by_id[s["msg_id"]]
        for field in ("topic", "broker", "queue_id", "queue_offset", "tags", "keys",
                      "user_properties", "body_sha256", "body_length"):
            assert r[field] == s[field], field
        assert r["reconsume_times"] == 0 and r["store_timestamp"] >= r["born_timestamp"] > 0
        assert r["keys"] == f"k-{s['index']} k-{s['index']}-1"
        # 4 KiB and more: compressed by Java's producer (COMPRESSED_FLAG, zlib type bits)
        assert r["sys_flag"] & 1 == (s["body_length"] >= 4096)
    assert {r["tags"] for r in got} == {"a", "b", None}
    assert all(r["user_properties"] == {"color": "blue", "größe": "ß"} for r in got)


def test_java_pulls_an_offset_range_of_each_queue(
        rocketmq_cluster: RocketMQCluster, java_peer: JavaPeer) -> None:
    topic = rocketmq_cluster.new_topic("pull", queues=2)
    sent = java_peer.produce(rocketmq_cluster.name_servers, topic, 10)
    pulled = java_peer.pull(rocketmq_cluster.name_servers, topic,
                            start={("broker-a", 0): 1, ("broker-a", 1): 2},
                            end={("broker-a", 0): 3, ("broker-a", 1): 4})
    assert sorted((r["queue_id"], r["queue_offset"]) for r in pulled) == [
        (0, 1), (0, 2), (1, 2), (1, 3)]
    ids = {(r["queue_id"], r["queue_offset"]): r["msg_id"] for r in sent}
    assert all(ids[(r["queue_id"], r["queue_offset"])] == r["msg_id"] for r in pulled)
    assert len(java_peer.pull(rocketmq_cluster.name_servers, topic, 10)) == 10


def test_java_sends_to_both_brokers_and_consumes_from_both(
        rocketmq_two_brokers: RocketMQCluster, java_peer: JavaPeer) -> None:
    cluster = rocketmq_two_brokers
    topic = cluster.new_topic()
    sent = java_peer.produce(cluster.name_servers, topic, 16)
    assert {r["broker"] for r in sent} == {"broker-a", "broker-b"}
    got = java_peer.consume(cluster.name_servers, topic, cluster.new_group(), 16)
    assert {r["msg_id"] for r in got} == {r["msg_id"] for r in sent}


@pytest.mark.rocketmq  # a cluster of its own, not a fixture's
def test_a_broker_whose_port_was_taken_starts_again_on_other_ports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # another process takes the broker's VIP port (port-2) between our check and its bind
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    vip: int = taken.getsockname()[1]
    first = True
    real = cluster_module.free_port

    def racy(offsets: tuple[int, ...] = (0,)) -> int:
        nonlocal first
        if offsets == (-2, 0, 1) and first:
            first = False
            return vip + 2
        return real(offsets)

    monkeypatch.setattr(cluster_module, "free_port", racy)
    with taken, RocketMQCluster(run_dir=tmp_path) as cluster:
        [broker] = cluster.brokers
        assert not first and broker.port != vip + 2 and broker.alive()
        assert "Address already in use" not in (tmp_path / "broker-0.out").read_text()
        assert _brokers(cluster.route(cluster.new_topic())) == {"broker-a": broker.addr}
    assert not broker.alive() and not list(tmp_path.glob("store-*"))


def test_a_java_consumer_stopped_by_sigterm_commits_and_its_group_resumes_there(
        rocketmq_cluster: RocketMQCluster, java_peer: JavaPeer) -> None:
    c = rocketmq_cluster
    topic, group = c.new_topic("resume"), c.new_group("resume")
    first = java_peer.produce(c.name_servers, topic, 8, run_id="before")
    consumer = java_peer.start_consume(c.name_servers, topic, group, 1000, timeout=300)
    got = [consumer.wait_for("received", 120) for _ in first]
    consumer.stop(60)
    assert {r["msg_id"] for r in got} == {r["msg_id"] for r in first}
    later = java_peer.produce(c.name_servers, topic, 4, run_id="after")
    again = java_peer.consume(c.name_servers, topic, group, 4, linger=2.0)
    # from the committed offsets: a group without them starts at the first message
    assert {r["msg_id"] for r in again} == {r["msg_id"] for r in later}
