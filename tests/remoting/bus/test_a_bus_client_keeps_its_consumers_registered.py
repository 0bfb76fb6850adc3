"""A bus client keeps its consumers registered at the bus server: a heartbeat keeps an idle
connection (which the server would close after ``max_idle_seconds``, forgetting the
consumers with it) open, and after a lost connection it registers them again by itself."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting._bus import _client
from remoting.bus import BusClient, EventBus, Message

from ...logs import capture_logs
from .conftest import WAIT, Closed, eventually


def test_a_dropped_connection_brings_the_consumers_back(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    closed = Closed()
    blocking_server.register_channel_event_listener(closed)
    owner = bus_clients()
    got = threading.Event()

    def handler(message: Message) -> None:
        got.set()

    owner.consumer("kept", handler)
    with capture_logs() as events:
        for channel in blocking_server.channels():
            channel.close()  # the server drops the client (a restart, a network fault)
        assert closed.closed.wait(WAIT)
        eventually(lambda: bus.statistics().remote_consumers == 1, "registered again")
    assert not [e for e in events if e["event"] == "bus.registration_lost"]  # at once
    bus.send("kept")
    assert got.wait(WAIT)


@pytest.fixture
def idle_server() -> Iterator[RemotingServer]:
    with RemotingServer(ServerConfig(max_idle_seconds=0.6)) as server:
        yield server


def test_a_heartbeat_keeps_an_idle_consumer_s_connection_open(
        idle_server: RemotingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_client, "HEARTBEAT_SECONDS", 0.1)
    with (EventBus() as bus, RemotingClient() as client,
          BusClient(client, idle_server.addr) as owner):
        bus.attach(idle_server)
        owner.consumer("quiet", lambda m: None)
        threading.Event().wait(1.5)  # the time under test: over twice the idle limit
        assert idle_server.statistics().connections_opened == 1  # never closed as idle
        assert bus.statistics().remote_consumers == 1


def test_consumers_come_back_when_a_restarted_server_listens_again() -> None:
    first = RemotingServer().start()
    port = first.port
    bus = EventBus()
    bus.attach(first)
    got = threading.Event()
    with RemotingClient() as client, BusClient(client, first.addr) as owner, \
            capture_logs() as events:
        owner.consumer("kept", lambda m: got.set())
        first.shutdown()  # the bus server goes away...
        bus.close()
        eventually(lambda: any(e["event"] == "bus.registration_lost" for e in events),
                   "the lost registration noticed")
        with RemotingServer(ServerConfig(listen_port=port)) as second, EventBus() as again:
            again.attach(second)  # ...and comes back on the same port
            eventually(lambda: again.statistics().remote_consumers == 1, "registered again")
            again.send("kept")
            assert got.wait(WAIT)
            # the keeper logs once the server's answer is back: maybe after the delivery
            eventually(lambda: any(e["event"] == "bus.registered_again" for e in events),
                       "the registration's return logged")
            assert [e["event"] for e in events if e["event"].startswith("bus.regist")] == [
                "bus.registration_lost", "bus.registered_again"]
