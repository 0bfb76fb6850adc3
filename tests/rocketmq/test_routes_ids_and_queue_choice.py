"""Routes as name servers write them, client and message ids as Java makes them, and how
queues are chosen: round-robin with fault avoidance, sharding keys, a group's allocation
(no sockets)."""

from __future__ import annotations

import os
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.rocketmq import MalformedResponseError, MessageQueue
from remoting.rocketmq._fault import FaultTolerance, PublishQueues, java_hash
from remoting.rocketmq._ids import UniqueIds, client_id, new_message_id
from remoting.rocketmq._offsets import allocate_averagely
from remoting.rocketmq._route import parse_route
from remoting.rocketmq._subscription import Subscription

from .factories import DATA, route_body


def test_a_real_name_servers_route_with_bare_broker_ids_parses() -> None:
    body = (DATA / "route_name_server_4_9_8.json").read_bytes()
    assert b'{0:"' in body  # fastjson's bare key: strict JSON refuses it
    route = parse_route(body, "T1")
    assert route.master("broker-a") == "127.0.0.1:45753"
    assert route.publish_queues("T1") == [MessageQueue("T1", "broker-a", i) for i in range(4)]
    assert route.subscribe_queues("T1") == route.publish_queues("T1")


def test_publish_queues_skip_unwritable_brokers_and_brokers_without_a_master() -> None:
    body = route_body({"b": "h:2", "a": "h:1"}, queues=2).replace(
        b'"brokerName":"b","perm":6', b'"brokerName":"b","perm":4')
    route = parse_route(body, "t")
    assert route.publish_queues("t") == [MessageQueue("t", "a", 0), MessageQueue("t", "a", 1)]
    assert len(route.subscribe_queues("t")) == 4
    assert route.limited(1).publish_queues("t") == [MessageQueue("t", "a", 0)]


@pytest.mark.parametrize("body", [b"", b"not json", b"[1,2]", b'{"queueDatas":[{"x":1}]}',
                                  b'{"brokerDatas":[{"brokerName":"a","brokerAddrs":{x:1}}]}'])
def test_a_route_that_is_not_one_is_a_malformed_response(body: bytes) -> None:
    with pytest.raises(MalformedResponseError):
        parse_route(body, "t")


def test_message_ids_are_java_s_uniq_key_layout() -> None:
    ids = UniqueIds(bytes([10, 1, 2, 3]), 0x12345, 0xCAFEBABE)
    now = int(time.time() * 1000)
    first, second = ids.new(now), ids.new(now)
    assert re.fullmatch(r"[0-9A-F]{32}", first)
    assert first[:20] == "0A010203" + "2345" + "CAFEBABE"  # ip, pid & 0xFFFF, class loader
    month_start = time.mktime(time.localtime(now / 1000)[:2] + (1, 0, 0, 0, 0, 0, -1))
    assert int(first[20:28], 16) == now - int(month_start * 1000)
    assert int(second[28:], 16) == int(first[28:], 16) + 1
    assert new_message_id()[8:12] == f"{os.getpid() & 0xFFFF:04X}"


def test_client_ids_are_ip_at_pid_and_distinct_in_one_process() -> None:
    a, b = client_id("10.0.0.1", None), client_id("10.0.0.1", None)
    assert a.startswith(f"10.0.0.1@{os.getpid()}#") and a != b
    assert client_id("10.0.0.1", "billing-1") == "10.0.0.1@billing-1"


@pytest.mark.parametrize(("text", "code"), [("", 0), ("a", 97), ("TagA", 2598919),
                                            ("hello", 99162322), ("\U0001F600", 1772899),
                                            ("tags-of-some-length-" * 3, 1605694992)])
def test_tag_hash_codes_are_java_s_string_hash_code_as_java_17_printed_them(
        text: str, code: int) -> None:
    assert java_hash(text) == code


def test_a_tag_expression_lists_its_tags_and_their_hash_codes() -> None:
    sub = Subscription.parse("t", " a || b ||", 5)
    assert sub.tags == {"a", "b"}
    assert sub.as_json()["codeSet"] == [97, 98]
    assert Subscription.parse("t", "*", 5).all and Subscription.parse("t", None, 5).all
    with pytest.raises(ValueError, match="names no tag"):
        Subscription.parse("t", "||", 5)


def _queues(brokers: str, n: int = 4) -> list[MessageQueue]:
    return [MessageQueue("t", b, i) for b in brokers for i in range(n)]


def test_round_robin_avoids_the_broker_that_just_failed() -> None:
    faults = FaultTolerance(enabled=False)
    publish = PublishQueues(_queues("ab"))
    for _ in range(50):
        assert publish.select(faults, "a", 0.0).broker_name == "b"


def test_a_slow_or_failed_broker_is_avoided_until_its_time_is_up() -> None:
    faults = FaultTolerance()
    publish = PublishQueues(_queues("ab"))
    faults.record("a", 0.001, failed=True, now=100.0)  # a failure counts 30 s: 600 s away
    assert {publish.select(faults, None, 101.0).broker_name for _ in range(40)} == {"b"}
    assert not faults.available("a", 699.0) and faults.available("a", 700.0)
    faults.record("b", 0.6, failed=False, now=100.0)  # 550 ms or more: 30 s away
    assert faults.available("b", 130.0) and not faults.available("b", 129.9)
    faults.record("b", 0.02, failed=False, now=200.0)  # fast again: available at once
    assert faults.available("b", 200.0)


def test_when_every_broker_is_avoided_the_least_bad_still_gets_the_send() -> None:
    faults = FaultTolerance()
    publish = PublishQueues(_queues("ab"))
    faults.record("a", 0.001, failed=True, now=0.0)
    faults.record("b", 2.5, failed=False, now=0.0)
    assert publish.select(faults, None, 1.0).broker_name in {"a", "b"}


@given(st.text(min_size=1, max_size=30))
def test_a_sharding_key_always_picks_the_same_queue(key: str) -> None:
    publish = PublishQueues(_queues("ab"))
    assert publish.by_key(key) == publish.by_key(key)
    assert publish.by_key(key) == publish.queues[abs(java_hash(key)) % 8]


def test_allocation_matches_java_s_averagely_for_its_own_test_cases() -> None:
    queues = [MessageQueue("t", "b", i) for i in range(10)]
    members = [f"c{i}" for i in range(4)]
    shares = [[q.queue_id for q in allocate_averagely(queues, members, m)] for m in members]
    assert shares == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    assert allocate_averagely(queues, members, "stranger") == []
    assert [len(allocate_averagely(queues[:2], members, m)) for m in members] == [1, 1, 0, 0]


@given(st.integers(1, 40), st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12,
                                    unique=True))
def test_every_queue_goes_to_exactly_one_member(n: int, members: list[str]) -> None:
    queues = [MessageQueue("t", f"b{i % 3}", i) for i in range(n)]
    shares = [allocate_averagely(queues, members, m) for m in members]
    flat = [q for share in shares for q in share]
    assert sorted(flat) == sorted(queues) and len(flat) == len(set(flat))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
