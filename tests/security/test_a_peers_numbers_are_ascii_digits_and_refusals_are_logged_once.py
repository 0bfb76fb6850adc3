"""A number a peer writes in a header field is an optional ``-`` and ASCII digits, nothing else,
wherever it becomes an int (codec/_header_numbers.py): streams, the event bus, the queue, typed
custom headers, JSON headers (tests/codec/test_json_header.py), the answers the clients and
the CLI read. Anything else is refused as each place documents (INVALID_PARAMETER, mostly),
never a SYSTEM_ERROR with a traceback; and a peer that repeats it is logged at most once per
connection and reason.

The review's case: ``credits`` of ``"²"`` passed ``str.isdigit()``, then ``int()`` raised:
200 such requests wrote 3,000 log lines (an ERROR and its traceback each) and were answered
SYSTEM_ERROR.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import trio

from codec import HeaderFieldError, RemotingCommand, ResponseCode
from codec._header_numbers import header_int
from processors import RequestContext, ServerStream, StreamProcessor
from remoting import (
    RemotingClient,
    RemotingServer,
    RemotingStreamError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting._bus._wire import BusCode
from remoting._messaging._codes import StreamCode
from remoting.bus import EventBus
from remoting.cli._tools import _statistics
from remoting.queue import QueueCode, QueueError, QueueService
from remoting.queue._wire import answered_int, parse_attempts
from tests.logs import capture_logs

WAIT = 10.0
STREAM = 710
# what int() takes, or str.isdigit() lets through, that a peer must not write
NOT_NUMBERS = ["\u00b2", "\u0663", "\uff15", "+5", " 5", "5 ", "1_0", "--5", "-", "", "5.0",
               "0x10", "9" * 5000]
TOO_LARGE = "9" * 20  # digits, and beyond every field's range


class Forever(StreamProcessor):
    """Sends one item, then waits until cancelled."""

    async def process_stream(self, ctx: RequestContext, request: RemotingCommand,
                             stream: ServerStream) -> None:
        await stream.send(RemotingCommand.create_request(0, body=b"x"))
        await trio.sleep_forever()


@dataclass
class Served:
    server: RemotingServer
    queue: QueueService


@pytest.fixture
def served() -> Iterator[Served]:
    """One server with a stream processor, an event bus and a queue service."""
    server = RemotingServer()
    server.register_processor(STREAM, Forever())
    queue = QueueService()
    queue.attach(server)
    with EventBus() as bus:
        bus.attach(server)
        server.start()
        try:
            create_topic(server)
            yield Served(server, queue)
        finally:
            server.shutdown()


def create_topic(server: RemotingServer) -> None:
    with RemotingClient() as client:
        reply = client.invoke_sync(server.addr, RemotingCommand.create_request(
            QueueCode.CREATE_TOPIC, {"topic": "t"}), WAIT)
        assert reply.code == ResponseCode.SUCCESS


# the requests a server reads a number from, with the field that gets ``value``
PLACES: dict[str, Callable[[str], tuple[int, dict[str, str]]]] = {
    "stream streamId": lambda v: (STREAM, {"streamId": v, "credits": "5"}),
    "stream credits": lambda v: (STREAM, {"streamId": "1", "credits": v}),
    "bus timeoutMillis": lambda v: (BusCode.SEND, {"kind": "send", "address": "a",
                                                   "timeoutMillis": v}),
    "bus window": lambda v: (BusCode.REGISTER, {"consumerId": "1", "address": "a",
                                                "window": v}),
    "bus consumerId": lambda v: (BusCode.CREDIT, {"consumerId": v, "credits": "1"}),
    "queue offset": lambda v: (QueueCode.PULL, {"topic": "t", "offset": v}),
    "queue max": lambda v: (QueueCode.PULL, {"topic": "t", "offset": "0", "max": v}),
    "queue deferMs": lambda v: (QueueCode.PUBLISH, {"topic": "t", "deferMs": v}),
}


def request(place: str, value: str) -> RemotingCommand:
    code, fields = PLACES[place](value)
    return RemotingCommand.create_request(code, fields, body=b"\0\0\0\1x")


@pytest.mark.parametrize("value", [*NOT_NUMBERS, TOO_LARGE])
@pytest.mark.parametrize("place", list(PLACES))
def test_each_place_refuses_what_is_not_an_ascii_integer_in_range(
        served: Served, place: str, value: str) -> None:
    with RemotingClient() as client:
        reply = client.invoke_sync(served.server.addr, request(place, value), WAIT)
    assert reply.code == ResponseCode.INVALID_PARAMETER, reply.remark
    assert place.split()[1] in (reply.remark or ""), reply.remark  # the field is named


def test_200_bad_numbers_from_one_peer_are_answered_each_and_logged_once_per_reason(
        served: Served) -> None:
    with RemotingClient() as client, capture_logs() as events:
        for i in range(200):
            place = list(PLACES)[i % len(PLACES)]
            reply = client.invoke_sync(served.server.addr,
                                       request(place, NOT_NUMBERS[i % 3]), WAIT)
            assert reply.code == ResponseCode.INVALID_PARAMETER, (place, reply.remark)
    loud = [e for e in events if e["log_level"] in ("warning", "error", "critical")]
    assert not [e for e in loud if e["log_level"] != "warning" or e.get("exc_info")], loud
    reasons = [(e["event"], e.get("code"), e.get("reason", "").split()[0]) for e in loud]
    assert len(reasons) == len(set(reasons)) <= 3, reasons  # the bus's three fields, once each


async def test_a_credit_frame_of_non_ascii_digits_ends_its_stream_and_is_logged_once(
        nursery: trio.Nursery) -> None:
    server = TrioRemotingServer(ServerConfig())
    server.register_processor(STREAM, Forever())
    port = await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    addr = f"127.0.0.1:{port}"
    with capture_logs() as events:
        for value in ["\u00b2", "\u0663", "+1", " 1"] * 5:
            async with client.open_stream(addr, RemotingCommand.create_request(STREAM),
                                          auto_credit=False) as stream:
                assert (await stream.receive()) is not None
                await client.invoke_oneway(addr, RemotingCommand.create_request(
                    StreamCode.CREDIT, {"streamId": str(stream.stream_id), "credits": value}))
                with trio.fail_after(WAIT), pytest.raises(RemotingStreamError) as caught:
                    await stream.receive()
            assert caught.value.code == ResponseCode.INVALID_PARAMETER
    warned = [e for e in events if e["log_level"] not in ("debug", "info")]
    assert [e["event"] for e in warned] == ["stream.bad_credit"], warned


@dataclass
class Header:
    count: int
    ratio: float = 0.0


@pytest.mark.parametrize("raw", ["\u00b2", "\u0663", "+5", " 5", "1_0", "9" * 5000, "2" * 20])
def test_a_typed_custom_header_refuses_what_java_would_not_write(raw: str) -> None:
    with pytest.raises(HeaderFieldError, match="Header.count"):
        RemotingCommand(ext_fields={"count": raw}).decode_header(Header)


@pytest.mark.parametrize("raw", ["\u0663.5", "1_0.5"])
def test_a_typed_custom_header_float_is_ascii_too(raw: str) -> None:
    with pytest.raises(HeaderFieldError, match="Header.ratio"):
        RemotingCommand(ext_fields={"count": "1", "ratio": raw}).decode_header(Header)


def test_what_java_writes_still_parses() -> None:
    assert RemotingCommand(ext_fields={"count": "-0042", "ratio": "-1.5e3"}).decode_header(
        Header) == Header(count=-42, ratio=-1500.0)
    assert header_int("x", "-9223372036854775808") == -(2**63)
    assert header_int("x", "18446744073709551615", 0, 2**64 - 1) == 2**64 - 1


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_header_int_refuses_without_repeating_the_text(value: str) -> None:
    with pytest.raises(ValueError, match="n is not an integer") as caught:
        header_int("n", value)
    assert value not in str(caught.value) or value in ("", "-")


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "1_0", "+1"])
def test_the_queue_clients_refuse_a_bad_number_in_an_answer(value: str) -> None:
    with pytest.raises(QueueError, match="the service answered a bad offset"):
        answered_int("127.0.0.1:1", {"offset": value}, "offset")
    with pytest.raises(ValueError, match="is not an integer"):
        parse_attempts(f"5:{value}")


@pytest.mark.parametrize("key", ["\u00b2", "\u0663", "--5", "+5", " 5"])
def test_the_cli_reads_a_stats_answer_with_a_bad_code_as_no_statistics(key: str) -> None:
    import json

    table = {key: 1}
    body = json.dumps({"connections": 0, "in_flight": 0, "timeouts": 0, "orphaned_responses": 0,
                       "requests_received": table, "error_replies": {},
                       "processor_queue": {}}).encode()
    assert _statistics(body) is None
