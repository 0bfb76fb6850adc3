"""A connection nobody reads is looked at before a call uses it, so a close the server sent
meanwhile is noticed and the call goes on a new connection; on ``io="threads"`` it is only
looked at when nothing was read from it for `PEEK_AFTER_SECONDS` (back-to-back calls, each
reading its own answer, save that system call). The idle sweep is slowed down here, so it is
not what notices the close."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from processors import EchoProcessor
from remoting import ChannelHandle, ClientConfig, RemotingClient, RemotingServer
from remoting._core._thread_driver import _thread_driver
from remoting._core._thread_driver._thread_connection import ThreadConnection

from ..factories import req

ECHO = 71
WAIT = 10.0


class Closes:
    """Notes close events."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def on_channel_connect(self, remote_addr: str, channel: ChannelHandle) -> None: ...

    def on_channel_close(self, remote_addr: str, channel: ChannelHandle) -> None:
        self.closed.set()

    def on_channel_exception(self, remote_addr: str, channel: ChannelHandle) -> None: ...

    def on_channel_idle(self, remote_addr: str, channel: ChannelHandle) -> None: ...


@pytest.fixture(autouse=True)
def no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_thread_driver, "SWEEP_SECONDS", 60.0)


@pytest.fixture
def server() -> Iterator[RemotingServer]:
    server = RemotingServer()
    server.register_processor(ECHO, EchoProcessor())
    with server:
        yield server


def test_a_connection_the_server_closed_meanwhile_is_not_used(
        server: RemotingServer, client_io: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_thread_driver, "PEEK_AFTER_SECONDS", 0.0)  # (no quiet spell to wait)
    closes, server_closes = Closes(), Closes()
    server.register_channel_event_listener(server_closes)
    with RemotingClient() as client:
        client.register_channel_event_listener(closes)
        assert client.invoke_sync(server.addr, req(ECHO, b"one"), 5).body == b"one"
        [channel] = server.channels()
        channel.close()
        assert server_closes.closed.wait(WAIT)  # its socket is closed: the close is sent
        if client_io == "loop":  # the loop reads at any time: wait until it read the close
            assert closes.closed.wait(WAIT)
        else:  # nobody reads it until the next call looks
            assert not closes.closed.is_set()
        answer = client.invoke_sync(server.addr, req(ECHO, b"two"), 5)
        assert answer.body == b"two"
        assert closes.closed.wait(WAIT)
        assert client.statistics().connections_opened == 2


@pytest.mark.default_io
def test_back_to_back_calls_do_not_look_but_a_call_after_a_quiet_spell_does(
        server: RemotingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    looks: list[ThreadConnection] = []
    peek = ThreadConnection.peek

    def counted(conn: ThreadConnection) -> None:
        looks.append(conn)
        peek(conn)

    monkeypatch.setattr(ThreadConnection, "peek", counted)
    with RemotingClient(ClientConfig(io="threads")) as client:
        client.invoke_sync(server.addr, req(ECHO), 5)  # (connects)
        del looks[:]
        # (a spell longer than a descheduled thread's, so a loaded machine cannot fail it)
        monkeypatch.setattr(_thread_driver, "PEEK_AFTER_SECONDS", 60.0)
        for _ in range(50):  # each reads its answer: the connection was read just now
            client.invoke_sync(server.addr, req(ECHO), 5)
        assert looks == []
        monkeypatch.setattr(_thread_driver, "PEEK_AFTER_SECONDS", 0.0)  # any spell is long
        client.invoke_sync(server.addr, req(ECHO), 5)
        assert len(looks) == 1
