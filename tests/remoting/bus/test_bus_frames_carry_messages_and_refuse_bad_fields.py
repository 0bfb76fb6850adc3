"""The bus's frames (sans-I/O): what a bus client builds, a bus server reads back after a
real encode and decode, headers and all; a missing or wrong field is a `BadBusRequest`, never
another exception; the codes stay in the range docs/protocol.md gives them."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given

from codec import FrameDecoder, RemotingCommand, SerializeType, encode_frame
from remoting._bus import _wire as wire
from remoting._bus._failure import ReplyFailure
from remoting.bus import MAX_ADDRESS_BYTES, BusCode


def through_the_wire(command: RemotingCommand, st_: SerializeType) -> RemotingCommand:
    command.serialize_type = st_
    decoder = FrameDecoder()
    decoder.feed(encode_frame(command))
    decoded = decoder.next_command()
    assert decoded is not None
    return decoded


def test_the_codes_are_in_the_bus_range_and_fit_the_binary_header() -> None:
    codes = [*wire.BusCode, *wire.FailureCode]
    assert all(32300 <= code <= 32399 for code in codes)
    assert len(set(codes)) == len(codes)


headers = st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=10), max_size=4)


@given(kind=st.sampled_from(["send", "publish", "request"]),
       address=st.text(min_size=1, max_size=30), body=st.binary(max_size=50), headers=headers,
       timeout=st.one_of(st.none(), st.floats(0.001, 1e6)),
       st_=st.sampled_from(list(SerializeType)))
def test_a_send_is_read_back_as_sent(kind: wire.Kind, address: str, body: bytes,
                                     headers: dict[str, str], timeout: float | None,
                                     st_: SerializeType) -> None:
    decoded = wire.send_of(through_the_wire(
        wire.send_command(kind, address, body, headers, timeout), st_))
    assert (decoded.kind, decoded.address, decoded.body, decoded.headers) == (
        kind, address, body, headers)
    if timeout is None:
        assert decoded.timeout is None
    else:  # whole milliseconds, rounded up, at least one
        assert decoded.timeout is not None and timeout <= decoded.timeout < timeout + 0.002


def test_a_push_and_a_reply_are_read_back() -> None:
    push = wire.deliver_of(through_the_wire(
        wire.deliver_command(7, "publish", "news", b"b", {"k": "v"}, None), SerializeType.JSON))
    assert (push.consumer_id, push.kind, push.address, push.headers, push.reply_address) == (
        7, "publish", "news", {"k": "v"}, None)
    fail = wire.reply_of(through_the_wire(
        wire.reply_command("fail", "12", b"", {}, None, 42, "no stock"), SerializeType.ROCKETMQ))
    assert (fail.kind, fail.reply_address, fail.failure_code, fail.failure_message) == (
        "fail", "12", 42, "no stock")


def test_a_failure_response_is_read_back_with_its_kind_code_and_message() -> None:
    sent = ReplyFailure("RECIPIENT_FAILURE", "no stock", address="orders", code=42)
    read = wire.failure_of(through_the_wire(wire.failure_response(sent), SerializeType.ROCKETMQ),
                           "orders")
    assert read is not None
    assert (read.kind, read.code, read.message, read.address) == (
        "RECIPIENT_FAILURE", 42, "no stock", "orders")
    assert wire.failure_of(wire.ok_response(), "x") is None


def test_an_answer_from_something_that_is_no_bus_names_its_code() -> None:
    response = RemotingCommand.create_response(2, "busy")
    failure = wire.failure_of(response, "x")
    assert failure is not None and failure.kind == "RECIPIENT_FAILURE"
    assert "code 2" in failure.message


@pytest.mark.parametrize(("ext", "says"), [
    ({}, "kind"),
    ({"kind": "shout", "address": "x"}, "kind"),
    ({"kind": "send"}, "no address"),
    ({"kind": "send", "address": ""}, "no address"),
    ({"kind": "send", "address": "a" * (MAX_ADDRESS_BYTES + 1)}, "at most"),
    ({"kind": "send", "address": "x", "timeoutMillis": "soon"}, "not an integer"),
    ({"kind": "send", "address": "x", "timeoutMillis": "0"}, "out of range"),
    ({"kind": "send", "address": "x", "timeoutMillis": "99999999999"}, "out of range"),
    ({"kind": "send", "address": "x", "timeoutMillis": "--5"}, "not an integer"),
    ({"kind": "send", "address": "x", "timeoutMillis": "-"}, "not an integer"),
    ({"kind": "send", "address": "x", "timeoutMillis": "9" * 5000}, "not an integer"),
    ({"kind": "send", "address": "x", "timeoutMillis": "\u0665"}, "not an integer"),
])
def test_a_bad_send_is_refused_with_a_reason(ext: dict[str, str], says: str) -> None:
    with pytest.raises(wire.BadBusRequest, match=says):
        wire.send_of(RemotingCommand.create_request(BusCode.SEND, ext))


@pytest.mark.parametrize("ext", [
    {"consumerId": "1", "address": "x"},
    {"consumerId": "-1", "address": "x", "window": "1"},
    {"consumerId": "1", "address": "x", "window": "0"},
    {"consumerId": "1", "address": "x", "window": str(wire.MAX_WINDOW + 1)},
    {"consumerId": "--1", "address": "x", "window": "1"},
    {"consumerId": "1" * 30, "address": "x", "window": "1"},
])
def test_a_bad_registration_is_refused(ext: dict[str, str]) -> None:
    with pytest.raises(wire.BadBusRequest):
        wire.register_of(RemotingCommand.create_request(BusCode.REGISTER, ext))


@pytest.mark.parametrize("ext", [
    {"consumerId": "1", "window": "1"},
    {"consumerId": "1", "window": "0", "credits": "0"},
    {"consumerId": "1", "window": "2", "credits": "-1"},
    {"consumerId": "1", "window": "2", "credits": str(wire.MAX_WINDOW + 1)},
])
def test_a_bad_window_is_refused(ext: dict[str, str]) -> None:
    with pytest.raises(wire.BadBusRequest):
        wire.window_of(RemotingCommand.create_request(BusCode.WINDOW, ext))


@given(st.dictionaries(st.sampled_from(["kind", "address", "timeoutMillis", "replyAddress",
                                        "consumerId", "window", "credits", "failureCode"]),
                       st.one_of(st.none(), st.text(max_size=12),
                                 st.from_regex(r"-*[0-9]{0,30}", fullmatch=True)), max_size=8))
def test_any_fields_give_a_message_or_a_bad_request_and_nothing_else(
        ext: dict[str, str | None]) -> None:
    request = RemotingCommand.create_request(BusCode.SEND, ext)
    for read in (wire.send_of, wire.reply_of, wire.register_of, wire.deliver_of,
                 wire.consumer_id_of, wire.credits_of, wire.window_of):
        try:
            read(request)
        except wire.BadBusRequest:
            pass


@pytest.mark.parametrize(("value", "error"), [
    (None, TypeError), (b"x", TypeError), ("", ValueError),
    ("a" * (MAX_ADDRESS_BYTES + 1), ValueError), ("\udc80", ValueError),
])
def test_a_caller_s_bad_address_fails_at_once(value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        wire.address_of(value)


@pytest.mark.parametrize(("value", "error"), [
    (0, ValueError), (-1, ValueError), (float("nan"), ValueError), ("1", TypeError),
    (True, TypeError),
])
def test_a_caller_s_bad_timeout_fails_at_once(value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        wire.timeout_of(value)


@pytest.mark.parametrize("value", [{"k": 1}, {1: "v"}, ["k"], "k=v"])
def test_bad_headers_fail_at_once(value: object) -> None:
    with pytest.raises(TypeError):
        wire.headers_of(value)
    with pytest.raises(ValueError, match="empty"):
        wire.headers_of({"": "v"})
