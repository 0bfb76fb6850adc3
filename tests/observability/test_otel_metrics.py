"""OpenTelemetry metrics: call durations by outcome, and the gauges and counters read from the
endpoints, collected by the real SDK's in-memory reader."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from codec import RemotingCommand, ResponseCode
from processors import EchoProcessor, RequestContext, RequestProcessor
from remoting import RemotingClient, RemotingServer, RemotingTimeoutError

from ..factories import req
from .conftest import Telemetry

ECHO, BUSY, RAISES, GATED = 1, 2, 3, 4


class Busy(RequestProcessor):
    def reject_request(self) -> bool:
        return False

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.create_response(ResponseCode.SYSTEM_BUSY, "busy")


class Raises(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("boom")


class Gated(RequestProcessor):
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.entered.set()
        self.release.wait(10)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


@pytest.fixture
def pair(otel: Telemetry) -> Iterator[tuple[RemotingServer, RemotingClient, Gated]]:
    gated = Gated()
    server = RemotingServer(otel.server_config())
    server.register_processor(ECHO, EchoProcessor())
    server.register_processor(BUSY, Busy())
    server.register_processor(RAISES, Raises())
    server.register_processor(GATED, gated, threads=1)
    with server.start(), RemotingClient(otel.client_config()).start() as client:
        yield server, client, gated
        gated.release.set()


def by_attributes(points: list[Any], *keys: str) -> dict[tuple[Any, ...], Any]:
    return {tuple(p.attributes.get(k) for k in keys): p for p in points}


def test_call_durations_by_code_and_outcome(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Gated],
) -> None:
    server, client, gated = pair
    for _ in range(3):
        client.invoke_sync(server.addr, req(ECHO), 5)
    client.invoke_sync(server.addr, req(BUSY), 5)
    client.invoke_sync(server.addr, req(RAISES), 5)
    with pytest.raises(RemotingTimeoutError):
        client.invoke_sync(server.addr, req(GATED), 0.1)
    with pytest.raises(Exception, match="connect"):
        client.invoke_sync("127.0.0.1:1", req(ECHO), 2)

    calls = by_attributes(otel.points("rpc.client.call.duration"), "rpc.method",
                          "remoting.outcome")
    assert {k: p.count for k, p in calls.items()} == {
        ("1", "success"): 3, ("2", "busy"): 1, ("3", "error_reply"): 1, ("4", "timeout"): 1,
        ("1", "send_failure"): 1}
    ok = calls[("1", "success")]
    assert ok.attributes == {"rpc.system.name": "rocketmq", "rpc.method": "1",
                             "remoting.outcome": "success", "rpc.response.status_code": "0",
                             "server.address": "127.0.0.1", "server.port": server.port}
    assert 0 < ok.sum < 3 and ok.max < 1
    assert calls[("3", "error_reply")].attributes["error.type"] == "1"
    assert calls[("1", "send_failure")].attributes["error.type"] == "RemotingConnectError"

    served = by_attributes(otel.points("rpc.server.call.duration"), "rpc.method",
                           "remoting.outcome")
    assert {k: p.count for k, p in served.items()} == {
        ("1", "success"): 3, ("2", "busy"): 1, ("3", "error_reply"): 1}
    assert served[("3", "error_reply")].attributes["error.type"] == "ValueError"
    assert "server.address" not in served[("1", "success")].attributes  # bounded: no peers


def test_gauges_and_counters_read_the_endpoints(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Gated],
) -> None:
    server, client, gated = pair
    client.invoke_sync(server.addr, req(ECHO, body=b"x" * 1000), 5)
    fut = client.invoke_async(server.addr, req(GATED), 10)
    assert gated.entered.wait(10)
    # The echo's reply left from its pool thread before the server's loop counted the echo
    # done (a reply does not wait for that bookkeeping): wait for the count to settle.
    deadline = time.monotonic() + 5
    while server.statistics().processing != 1:
        assert time.monotonic() < deadline, "the echo was never counted done"

    def value(name: str, role: str, **more: str) -> Any:
        for point in otel.points(name):
            if point.attributes == {"remoting.role": role, **more}:
                return point.value
        return None

    assert value("remoting.calls.in_flight", "client") == 1
    assert value("remoting.requests.processing", "server") == 1
    assert value("remoting.processor.queue_depth", "server", **{"rpc.method": str(GATED)}) == 1
    assert value("remoting.connections", "client") == 1
    assert value("remoting.connections", "server") == 1
    io = {"network.io.direction": "transmit"}
    assert value("remoting.io", "client", **io) > 1000
    io = {"network.io.direction": "receive"}
    assert value("remoting.io", "server", **io) > 1000
    assert value("remoting.io", "client", **io) > 1000  # the echo came back
    gated.release.set()
    assert fut.result().code == ResponseCode.SUCCESS
    assert value("remoting.calls.in_flight", "client") == 0
    assert value("remoting.timeouts", "client") == 0
    assert value("remoting.go_away.received", "client") == 0


def test_go_away_and_orphaned_responses_are_counted(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Gated],
) -> None:
    server, client, gated = pair
    client.invoke_sync(server.addr, req(ECHO), 5)
    # a call times out while its request is being processed; its late answer is orphaned
    late = RemotingClient(otel.client_config(close_socket_if_timeout=False)).start()
    try:
        with pytest.raises(RemotingTimeoutError):
            late.invoke_sync(server.addr, req(GATED), 0.1)
        gated.release.set()
        # the late answer is read once a caller or the background reader reads that connection
        deadline = time.monotonic() + 5
        while late.statistics().orphaned_responses < 1:
            assert time.monotonic() < deadline, "the late answer was never read"
            late.invoke_sync(server.addr, req(ECHO), 5)
    finally:
        late.shutdown()
    server.drain()
    with pytest.raises(Exception, match="GO_AWAY"):
        client.invoke_sync(server.addr, req(ECHO), 2)

    def total(name: str) -> int:
        return sum(p.value for p in otel.points(name) if p.attributes == {"remoting.role":
                                                                           "client"})

    assert total("remoting.responses.orphaned") == 1
    assert total("remoting.timeouts") == 1
    assert total("remoting.go_away.received") == 2  # the call, and its one resend
