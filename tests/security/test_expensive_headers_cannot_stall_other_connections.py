"""Headers cost their reader time per byte (relaxed JSON most: bench/header_cost.py), on the
event loop every connection shares. ``max_header_bytes`` bounds what one frame can cost: a
longer header closes its connection on the frame's 8-byte prefix, before it is read."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from codec import HeaderTooLargeError, RemotingCommand, ResponseCode
from processors import EchoProcessor
from remoting import RemotingClient, RemotingCommandError, RemotingServer, ServerConfig

from ..logs import capture_logs

ECHO = 1


def relaxed_header(size: int) -> bytes:
    """A JSON header orjson refuses (unquoted keys), of the shape slowest to parse."""
    head = b"{code:1,flag:0,language:'JAVA',opaque:7,version:0,extFields:{a:["
    return head + b"1," * ((size - len(head) - 4) // 2) + b"1]}}"


def frame(header: bytes) -> bytes:
    return struct.pack(">iI", 4 + len(header), len(header)) + header


@pytest.fixture
def server() -> Iterator[RemotingServer]:
    srv = RemotingServer(ServerConfig()).start()
    srv.register_processor(ECHO, EchoProcessor())
    try:
        yield srv
    finally:
        srv.shutdown()


class Attacker(threading.Thread):
    """A raw connection that sends ``data``, then reads until the server closes it or
    ``replies`` frames came back."""

    def __init__(self, port: int, data: bytes, replies: int = -1) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.data = data
        self.replies = replies
        self.closed_by_server = threading.Event()

    def run(self) -> None:
        received = b""
        try:
            self.sock.sendall(self.data)
            while chunk := self.sock.recv(65536):
                received += chunk
                if 0 <= self.replies <= frames_in(received):
                    return
        except OSError:  # reset by the server while sending: closed too
            pass
        finally:
            self.sock.close()
        self.closed_by_server.set()


def frames_in(data: bytes) -> int:
    count = pos = 0
    while pos + 4 <= len(data):
        pos += 4 + struct.unpack_from(">i", data, pos)[0]
        count += pos <= len(data)
    return count


def worst_latency_while(client: RemotingClient, addr: str, attacker: Attacker) -> float:
    """Call the server over and over while ``attacker`` runs (and 20 calls more); return
    the slowest call's seconds."""
    worst = 0.0
    extra = 20
    deadline = time.monotonic() + 30
    while extra and time.monotonic() < deadline:
        if not attacker.is_alive():
            extra -= 1
        start = time.monotonic()
        response = client.invoke_sync(addr, RemotingCommand.create_request(ECHO, body=b"v"), 30)
        worst = max(worst, time.monotonic() - start)
        assert response.code == ResponseCode.SUCCESS and response.body == b"v"
    return worst


def test_a_huge_header_closes_its_connection_before_it_costs_the_loop(
    server: RemotingServer,
) -> None:
    """Two frames of 15 MB relaxed-JSON headers froze the loop for seconds (every other
    connection waited); now the first prefix closes that connection."""
    _huge_headers_worst_latency(server)


@pytest.mark.slow
def test_a_huge_header_holds_no_other_call_up(server: RemotingServer) -> None:
    worst = _huge_headers_worst_latency(server)
    assert worst < 1.0, f"a call on another connection waited {worst:.2f} s"


def _huge_headers_worst_latency(server: RemotingServer) -> float:
    """Send two huge headers while calling on another connection; check that the first
    closed its connection, and return the slowest call's seconds."""
    addr = f"127.0.0.1:{server.port}"
    with RemotingClient() as victim, capture_logs() as logs:
        victim.invoke_sync(addr, RemotingCommand.create_request(ECHO), 5)  # connected
        attacker = Attacker(server.port, frame(relaxed_header(15_000_000)) * 2)
        attacker.start()
        worst = worst_latency_while(victim, addr, attacker)
        assert attacker.closed_by_server.wait(10)
    broken = [e for e in logs if e["event"] == "connection.broken"]
    assert len(broken) == 1 and "max_header_bytes" in broken[0]["error"]
    closed = [e for e in logs if e["event"] == "connection.closed"]
    assert len(closed) == 1 and "header of 15000" in closed[0]["reason"]
    return worst


def test_headers_under_the_limit_are_answered_and_other_calls_too(
        server: RemotingServer) -> None:
    _slowest_headers_worst_latency(server)


@pytest.mark.slow
def test_headers_under_the_limit_cost_each_read_little(server: RemotingServer) -> None:
    """The slowest headers the limit lets in, back to back, hold other calls up for no
    more than a fraction of a second (each read of them costs tens of milliseconds)."""
    worst = _slowest_headers_worst_latency(server)
    assert worst < 0.5, f"a call on another connection waited {worst:.2f} s"


def _slowest_headers_worst_latency(server: RemotingServer) -> float:
    """Send 40 of the slowest headers the limit lets in while calling on another
    connection; check that all were answered, and return the slowest call's seconds."""
    addr = f"127.0.0.1:{server.port}"
    limit = server.config.max_header_bytes
    with RemotingClient() as victim, capture_logs() as logs:
        victim.invoke_sync(addr, RemotingCommand.create_request(ECHO), 5)
        # 40 requests of code 1 with a 64 KiB header: 40 echo replies, about 2.6 MB parsed
        attacker = Attacker(server.port, frame(relaxed_header(limit)) * 40, replies=40)
        attacker.start()
        worst = worst_latency_while(victim, addr, attacker)
        assert not attacker.closed_by_server.is_set()  # all 40 were answered
    assert not [e for e in logs if e["event"] == "connection.broken"]
    return worst


class LongHeaderReply(EchoProcessor):
    def process_request(self, ctx: object, request: RemotingCommand
                        ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.ext_fields = {"k": "v" * 70_000}
        return response


def test_a_header_over_the_limit_is_refused_where_it_is_made(server: RemotingServer) -> None:
    """As for a frame over max_frame_bytes: the one call fails, not the connection."""
    addr = f"127.0.0.1:{server.port}"
    server.register_processor(2, LongHeaderReply())
    with RemotingClient() as client:
        request = RemotingCommand.create_request(ECHO, header={"k": "v" * 70_000})
        with pytest.raises(RemotingCommandError) as info:
            client.invoke_sync(addr, request, 5)
        assert isinstance(info.value.__cause__, HeaderTooLargeError)
        reply = client.invoke_sync(addr, RemotingCommand.create_request(2), 5)
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert "max_header_bytes" in (reply.remark or "")
        ok = client.invoke_sync(addr, RemotingCommand.create_request(ECHO, body=b"k"), 5)
        assert ok.body == b"k"
        assert client.statistics().connections_opened == 1  # the same connection throughout
