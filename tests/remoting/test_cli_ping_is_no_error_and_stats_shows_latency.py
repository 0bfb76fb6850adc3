"""``remoting ping`` is answered SUCCESS by every server of ours, so it counts as no error reply
in the server's statistics (an unknown code did); ``remoting stats`` shows the latency table
of a server that has one (its calls to its clients)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from codec import RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor, EchoProcessor
from remoting import (
    PING_REQUEST_CODE,
    STATS_REQUEST_CODE,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    StatsProcessor,
)
from remoting.cli import main

PUSHED = 7


@pytest.fixture
def server() -> Iterator[RemotingServer]:
    with RemotingServer(ServerConfig()) as srv:
        srv.register_processor(STATS_REQUEST_CODE, StatsProcessor(srv.statistics))
        yield srv


def test_a_ping_is_answered_success_and_is_no_error_reply(
        server: RemotingServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ping", server.addr, "--count", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"code={ResponseCode.SUCCESS} ") == 3, out
    stats = server.statistics()
    assert stats.requests_received.get(PING_REQUEST_CODE) == 3
    assert stats.error_replies == {}


def test_a_processor_registered_for_the_ping_code_still_serves_it(server: RemotingServer
                                                                  ) -> None:
    server.register_processor(PING_REQUEST_CODE, EchoProcessor())
    with RemotingClient() as client:
        reply = client.invoke_sync(
            server.addr, RemotingCommand.create_request(PING_REQUEST_CODE, body=b"mine"), 5)
    assert reply.body == b"mine"  # the service's own processor, not the transport's answer


def test_stats_shows_latency_when_the_server_has_some(
        server: RemotingServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", server.addr]) == 0
    assert "latency" not in capsys.readouterr().out  # a server that called no one has none
    with RemotingClient() as client:
        client.register_processor(PUSHED, AsyncEchoProcessor())
        client.invoke_sync(server.addr, RemotingCommand.create_request(STATS_REQUEST_CODE), 5)
        [channel] = server.channels()
        for _ in range(4):
            server.invoke_sync(channel, RemotingCommand.create_request(PUSHED), 5)
        assert main(["stats", server.addr]) == 0
        out = capsys.readouterr().out
        assert main(["stats", server.addr, "--json"]) == 0
        latency = json.loads(capsys.readouterr().out)["latency"][str(PUSHED)]
    lines = out.splitlines()
    head = lines.index("latency of its own calls, ms:")
    assert lines[head + 1].split() == ["code", "calls", "mean", "p50", "p90", "p99", "max"]
    row = lines[head + 2].split()
    assert row[:2] == [str(PUSHED), "4"]
    assert float(row[-1]) == pytest.approx(latency["max"] * 1000, abs=0.01)
