"""The client's conversations (routes, sends with retries, offsets) run against scripted
answers: name server failover, the auto-create fallback, retries on another broker, what is
raised when (no sockets)."""

from __future__ import annotations

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import RemotingConnectError, RemotingTimeoutError
from remoting.rocketmq import MQBrokerError, SendFailedError, SendStatus, TopicRouteError
from remoting.rocketmq._flows import Call, fetch_route, publish_queues, query_offset
from remoting.rocketmq._instance import ClientState, name_server_list
from remoting.rocketmq._message import MessageQueue
from remoting.rocketmq._protocol import Code
from remoting.rocketmq._send import SendOptions, prepare, prepare_batch, send

from .factories import Responder, response, route_body

NS = ["ns1:9876", "ns2:9876"]


def _state(latency_fault: bool = False) -> ClientState:
    state = ClientState(list(NS), "10.0.0.1@1#1", latency_fault=latency_fault)
    state.current_name_server = 0
    return state




def test_name_servers_are_a_list_or_javas_semicolon_string() -> None:
    assert name_server_list("a:1; b:2;") == ["a:1", "b:2"]
    assert name_server_list(["a:1"]) == ["a:1"]
    for bad in ("", "nohost", "a:0", "a:x", [1]):
        with pytest.raises((ValueError, TypeError)):
            name_server_list(bad)  # type: ignore[arg-type]


def test_a_route_lookup_fails_over_to_the_next_name_server() -> None:
    def answer(call: Call):  # type: ignore[no-untyped-def]
        if call.addr == "ns1:9876":
            raise RemotingConnectError(call.addr, "refused")
        return response(body=route_body({"a": "h:1"}))

    state = _state()
    responder = Responder(answer)
    route = responder.run(fetch_route(state, "t"))
    assert route is not None and route.master("a") == "h:1"
    assert [c.addr for c in responder.calls] == NS
    assert state.name_server_order()[0] == "ns2:9876"  # sticks to the one that answered


def test_no_name_server_answering_is_a_topic_route_error_with_the_cause() -> None:
    def answer(call: Call):  # type: ignore[no-untyped-def]
        raise RemotingTimeoutError(call.addr, 3.0)

    with pytest.raises(TopicRouteError) as caught:
        Responder(answer).run(fetch_route(_state(), "t"))
    assert isinstance(caught.value.__cause__, RemotingTimeoutError)
    assert caught.value.topic == "t"


def test_a_topic_no_one_knows_is_sent_on_the_auto_create_topics_brokers() -> None:
    def answer(call: Call):  # type: ignore[no-untyped-def]
        if call.request.ext_fields["topic"] == "TBW102":  # type: ignore[index]
            return response(body=route_body({"a": "h:1"}, queues=8))
        return response(ResponseCode.TOPIC_NOT_EXIST, "no route")

    state = _state()
    publish = Responder(answer).run(publish_queues(state, "fresh"))
    assert publish.queues == [MessageQueue("fresh", "a", i) for i in range(4)]
    assert "fresh" in state.stale  # looked up again next time: the broker made it


def _cluster(state: ClientState, brokers: dict[str, str]) -> None:
    def answer(call: Call):  # type: ignore[no-untyped-def]
        return response(body=route_body(brokers))
    Responder(answer).run(publish_queues(state, "t"))


OPTIONS = SendOptions(group="g", timeout=30.0, retries=2)


def _ok(call: Call) -> RemotingCommand:
    queue_id = (call.request.ext_fields or {})["e"]
    assert queue_id is not None
    return response(fields={"msgId": "ABC", "queueId": queue_id, "queueOffset": "7"})


def test_a_failed_send_is_retried_on_another_broker_with_the_same_message_id() -> None:
    state = _state()
    _cluster(state, {"a": "h:1", "b": "h:2"})
    seen: list[tuple[str, str]] = []

    def answer(call: Call):  # type: ignore[no-untyped-def]
        if call.request.code == Code.GET_ROUTEINFO_BY_TOPIC:
            return response(body=route_body({"a": "h:1", "b": "h:2"}))
        fields = call.request.ext_fields or {}
        seen.append((call.addr, fields["i"]))  # type: ignore[arg-type]
        if len(seen) == 1:
            raise RemotingTimeoutError(call.addr, 3.0)
        return _ok(call)

    message = prepare(OPTIONS, "t", b"body", tags="x")
    responder = Responder(answer)
    result = responder.run(send(state, OPTIONS, message))
    assert result is not None  # (None: a oneway send)
    assert result.status is SendStatus.SEND_OK and result.queue_offset == 7
    assert seen[0][0] != seen[1][0]  # another broker
    assert seen[0][1] == seen[1][1] and result.msg_id in seen[0][1]  # the same UNIQ_KEY
    # the failure made the route suspect: it was looked up again before the retry
    assert [c.request.code for c in responder.calls] == [
        Code.SEND_MESSAGE_V2, Code.GET_ROUTEINFO_BY_TOPIC, Code.SEND_MESSAGE_V2]


def test_a_refusal_not_worth_another_broker_is_raised_at_once() -> None:
    state = _state()
    _cluster(state, {"a": "h:1", "b": "h:2"})
    responder = Responder(lambda call: response(ResponseCode.MESSAGE_ILLEGAL, "too big"))
    with pytest.raises(MQBrokerError) as caught:
        responder.run(send(state, OPTIONS, prepare(OPTIONS, "t", b"x")))
    assert caught.value.code == ResponseCode.MESSAGE_ILLEGAL and len(responder.calls) == 1


def test_every_attempt_failing_raises_send_failed_with_each_brokers_error() -> None:
    state = _state()
    _cluster(state, {"a": "h:1", "b": "h:2"})
    def answer(call: Call):  # type: ignore[no-untyped-def]
        if call.request.code == Code.GET_ROUTEINFO_BY_TOPIC:
            return response(body=route_body({"a": "h:1", "b": "h:2"}))
        return response(ResponseCode.SYSTEM_BUSY, "busy")

    with pytest.raises(SendFailedError) as caught:
        Responder(answer).run(send(state, OPTIONS, prepare(OPTIONS, "t", b"x")))
    assert len(caught.value.attempts) == 3
    assert all(isinstance(e, MQBrokerError) for _, e in caught.value.attempts)


def test_a_batch_is_one_send_batch_frame_with_each_messages_id() -> None:
    state = _state()
    _cluster(state, {"a": "h:1"})
    responder = Responder(_ok)
    batch = prepare_batch(OPTIONS, "t", [b"1", b"2", b"3"], tags="x")
    result = responder.run(send(state, OPTIONS, batch))
    (call,) = [c for c in responder.calls if c.request.code == Code.SEND_BATCH_MESSAGE]
    assert call.request.ext_fields["m"] == "true"  # type: ignore[index]
    assert result is not None
    assert len(result.msg_ids) == 3 and result.msg_id == ",".join(result.msg_ids)


def test_bodies_at_the_threshold_are_compressed_with_javas_flags() -> None:
    small = prepare(OPTIONS, "t", b"x" * 4095)
    large = prepare(OPTIONS, "t", b"x" * 4096)
    assert small.sys_flag == 0 and small.body == b"x" * 4095
    assert large.sys_flag == 0x1 | (0x3 << 8) and len(large.body) < 100


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"topic": "bad topic"}, ValueError), ({"topic": "TBW102"}, ValueError),
    ({"body": b""}, ValueError), ({"body": "text"}, TypeError),
    ({"properties": {"TAGS": "x"}}, ValueError), ({"properties": {"a": 1}}, TypeError),
    ({"keys": [1]}, TypeError), ({"body": b"x" * (4 * 1024 * 1024 + 1)}, ValueError)])
def test_bad_messages_are_refused_before_anything_is_sent(kwargs: dict[str, object],
                                                          error: type[Exception]) -> None:
    args: dict[str, object] = {"topic": "t", "body": b"x", **kwargs}
    with pytest.raises(error):
        prepare(OPTIONS, args.pop("topic"), args.pop("body"), **args)  # type: ignore[arg-type]


def test_an_offset_the_broker_has_none_of_is_not_found() -> None:
    responder = Responder(lambda call: response(ResponseCode.QUERY_NOT_FOUND, "none"))
    assert responder.run(query_offset("h:1", "g", MessageQueue("t", "a", 0))) == -1
    responder = Responder(lambda call: response(fields={"offset": "42"}))
    assert responder.run(query_offset("h:1", "g", MessageQueue("t", "a", 0))) == 42
