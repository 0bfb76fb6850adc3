"""A client that disconnects has its consumers removed at once, and what was on its way to
them or in their hands is failed to the senders as RECIPIENT_FAILURE, never lost silently:
requests its handler held, sends queued at the server for it. A consumer unregistered while
the server pushes to it passes its messages on to the next consumer."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._bus._wire import register_command
from remoting.bus import BusClient, EventBus, Message, ReplyFailure

from .conftest import WAIT, Closed, Collected, eventually


class Outcome:
    """Runs a bus call in a thread and keeps what it returned or raised."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.value: object = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(call,))
        self._thread.start()

    def _run(self, call: Callable[[], object]) -> None:
        try:
            self.value = call()
        except BaseException as exc:
            self.value = exc
        self.done.set()

    def failure(self) -> ReplyFailure:
        assert self.done.wait(WAIT), "the call did not end"
        self._thread.join(WAIT)
        assert isinstance(self.value, ReplyFailure), self.value
        return self.value


@pytest.mark.parametrize("bus", [{"max_queued_per_consumer": 5}], indirect=True)
def test_a_disconnect_fails_held_requests_and_queued_sends(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    closed = Closed()
    blocking_server.register_channel_event_listener(closed)  # after the bus's listener
    sender = bus_clients()
    holder_client = RemotingClient(ClientConfig()).start()
    holder = BusClient(holder_client, blocking_server.addr)
    entered, release = threading.Event(), threading.Event()

    def stuck(message: Message) -> None:
        entered.set()
        release.wait(WAIT)

    try:
        holder.consumer("h", stuck, max_buffered=2)
        request = Outcome(lambda: sender.request("h", b"r1", timeout=WAIT))
        assert entered.wait(WAIT)  # the handler holds the request
        sender.send("h", b"s2", timeout=WAIT)  # in the consumer's buffer: the window is full
        queued = Outcome(lambda: sender.send("h", b"s3", timeout=WAIT))
        eventually(lambda: bus.statistics().queued == 1, "s3 queued at the server")
        holder_client.shutdown()  # the holder's process goes away
        assert closed.closed.wait(WAIT)
        held, waiting = request.failure(), queued.failure()
        assert held.kind == waiting.kind == "RECIPIENT_FAILURE"
        assert "went away" in held.message and "closed" in waiting.message
        assert bus.statistics().remote_consumers == 0
        with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
            sender.send("h", b"s4", timeout=WAIT)
    finally:
        release.set()
        holder.close()
        holder_client.shutdown()


def test_a_request_held_by_a_disconnecting_consumer_fails_before_its_timeout(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    sender = bus_clients()
    holder_client = RemotingClient(ClientConfig()).start()
    holder = BusClient(holder_client, blocking_server.addr)
    entered = threading.Event()
    holder.consumer("h", lambda m: entered.set())  # never replies
    request = Outcome(lambda: sender.request("h", b"r", timeout=300))
    assert entered.wait(WAIT)
    holder_client.shutdown()
    assert request.failure().kind == "RECIPIENT_FAILURE"  # long before 300 s
    holder.close()


def test_an_unregistered_consumer_s_messages_go_to_the_next_one(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    leaving, staying, sender = bus_clients(), bus_clients(), bus_clients()
    got = Collected()

    def keep(name: str) -> Callable[[Message], None]:
        return lambda message: got.add((name, message.body))

    gone = leaving.consumer("w", keep("leaving"))
    staying.consumer("w", keep("staying"))
    gone.unregister()
    gone.unregister()  # twice: nothing more happens
    assert not gone.registered
    for i in range(20):  # the server may not know yet: what it pushes comes back, re-routed
        sender.send("w", b"%d" % i, timeout=WAIT)
    assert {name for name, _ in got.wait_for(20)} == {"staying"}
    eventually(lambda: bus.statistics().remote_consumers == 1, "the server forgot it")


def test_a_push_refused_as_not_registered_goes_to_the_next_consumer(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    staying, sender = bus_clients(), bus_clients()
    got = Collected()
    staying.consumer("w", lambda m: got.add(m.body))
    # a consumer the server knows and its client does not (as just after an unregister)
    ghost = bus_clients()
    response = ghost._blocking.invoke_sync(blocking_server.addr,
                                           register_command(10**9, "w", 1), WAIT)
    assert response.code == 0 and bus.statistics().remote_consumers == 2
    for i in range(2):  # one of the two is the ghost's turn
        sender.send("w", b"%d" % i, timeout=WAIT)
    assert got.wait_for(2) == [b"0", b"1"]  # both handled by the consumer that exists
    assert bus.statistics().remote_consumers == 1  # the refusal removed the ghost


class Stuck(Closed):
    """A channel listener that blocks the server's event thread on the first close."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def on_channel_close(self, remote_addr: str, channel: object) -> None:
        self.closed.set()
        self.release.wait(WAIT)


def test_a_closed_connection_s_consumers_go_even_while_channel_listeners_are_stuck() -> None:
    stuck = Stuck()
    with RemotingServer() as server, EventBus() as bus:
        server.register_channel_event_listener(stuck)  # before the bus: it hears first
        bus.attach(server)
        try:
            with RemotingClient(ClientConfig()) as first:
                first.invoke_sync(server.addr, register_command(1, "a", 1), WAIT)
            assert stuck.closed.wait(WAIT)  # the event thread is held from here on
            with RemotingClient(ClientConfig()) as holder:
                holder.invoke_sync(server.addr, register_command(2, "b", 1), WAIT)
                assert bus.statistics().remote_consumers == 1
            eventually(lambda: bus.statistics().remote_consumers == 0,
                       "the consumers of the closed connection forgotten")
        finally:
            stuck.release.set()
