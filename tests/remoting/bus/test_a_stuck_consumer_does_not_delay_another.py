"""A client whose consumer stops answering the server's pushes (it takes them and never says
so), or stops reading its connection altogether, holds only its own consumer's window: the
server's pushes to it take none of the server's call permits, so the messages of every other
consumer go on at once. Each consumer's window bounds what the server has in flight to it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from codec import FrameDecoder, RemotingCommand, encode_frame
from processors import RequestContext, RequestProcessor
from remoting import ClientConfig, RemotingClient, RemotingServer, ServerConfig
from remoting._bus._wire import BusCode, register_command, send_command
from remoting.bus import BusClient, EventBus, Message

from .conftest import WAIT, Collected, eventually

PERMITS = 4  # the server's call permits: fewer than the pushes the stuck consumer holds
STUCK_SENDS = 3 * PERMITS


class NeverAnswers(RequestProcessor):
    """Takes the server's pushes and answers none of them (until the test ends)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.taken = threading.Semaphore(0)

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.taken.release()
        self.release.wait(WAIT)
        return None


@pytest.fixture
def small_server() -> Iterator[RemotingServer]:
    """A server with few call permits (a client that stops answering would hold them all)."""
    with RemotingServer(ServerConfig(server_async_semaphore_value=PERMITS,
                                     server_oneway_semaphore_value=PERMITS)) as server:
        yield server


def test_a_consumer_that_never_answers_does_not_delay_another_consumer(
        small_server: RemotingServer) -> None:
    stuck = NeverAnswers()
    with (EventBus() as bus, RemotingClient(ClientConfig()) as stuck_client,
          RemotingClient(ClientConfig()) as sender_client, RemotingClient(ClientConfig()) as c3,
          BusClient(c3, small_server.addr) as healthy, BusClient(sender_client,
                                                                 small_server.addr) as sender):
        bus.attach(small_server)
        stuck_client.register_processor(BusCode.DELIVER, stuck, threads=STUCK_SENDS)
        assert stuck_client.invoke_sync(small_server.addr,
                                        register_command(1, "stuck", 100), WAIT).code == 0
        sends = [sender_client.invoke_async(small_server.addr, send_command(
            "send", "stuck", b"%d" % i, {}, 3 * WAIT), 4 * WAIT) for i in range(STUCK_SENDS)]
        for _ in range(PERMITS):  # as many pushes as the server has permits: unanswered
            assert stuck.taken.acquire(timeout=WAIT)
        seen = Collected()

        def keep_and_reply(m: Message) -> None:
            seen.add(m.body)
            m.reply(b"ok")

        healthy.consumer("healthy", keep_and_reply)
        try:
            assert sender.request("healthy", b"r", timeout=WAIT / 2).body == b"ok"
            sender.send("healthy", b"s", timeout=WAIT / 2)
            sender.publish("healthy", b"p")
            assert seen.wait_for(3) == [b"r", b"s", b"p"]
            for _ in range(STUCK_SENDS - PERMITS):  # the window let every push through
                assert stuck.taken.acquire(timeout=WAIT)
            assert not any(f.done() for f in sends)  # the stuck ones still wait
        finally:
            stuck.release.set()


def _frame(command: RemotingCommand) -> bytes:
    return encode_frame(command)


def test_a_client_that_stops_reading_does_not_delay_another_consumer(
        small_server: RemotingServer) -> None:
    with (EventBus() as bus, RemotingClient(ClientConfig()) as c1,
          RemotingClient(ClientConfig()) as c2, BusClient(c1, small_server.addr) as healthy,
          BusClient(c2, small_server.addr) as publisher,
          socket.create_connection(("127.0.0.1", small_server.port)) as raw):
        bus.attach(small_server)
        raw.sendall(_frame(register_command(1, "news", 1000)))
        decoder = FrameDecoder()
        while (answer := decoder.next_command()) is None:
            decoder.feed(raw.recv(65536))
        assert answer.code == 0
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and it reads no more
        seen = Collected()
        healthy.consumer("news", lambda m: seen.add(len(m.body)))
        big = b"x" * (1 << 20)
        for _ in range(3 * PERMITS):  # more than the socket buffers take: frames wait queued
            publisher.publish("news", big)
        assert len(seen.wait_for(3 * PERMITS)) == 3 * PERMITS
        eventually(lambda: small_server.statistics().queued_bytes > (1 << 20),
                   "pushes queued for the client that stopped reading")
        publisher.publish("news", b"after")  # the healthy consumer still gets it, at once
        assert seen.wait_for(3 * PERMITS + 1)[-1] == len(b"after")
