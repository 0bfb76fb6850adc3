"""A bus server answers a client's send when its receipt comes, and a client's request when
its reply comes, from the callbacks that bring them: its SEND processor suspends nothing
and starts no task per message; a request nobody answers is answered TIMEOUT by the
server's one timer at the request's deadline (not left to the client's own, later, timeout);
a send still queued for room at its deadline is answered TIMEOUT by the server."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import trio
import trio.lowlevel

from remoting import ClientConfig, RemotingClient, RemotingServer, TrioRemotingServer
from remoting.bus import BusClient, EventBus, Message, ReplyFailure

from ..conftest import addr_of
from .conftest import WAIT, Collected, eventually

MESSAGES = 40


class Spawned(trio.abc.Instrument):
    """Counts the tasks the loop starts."""

    def __init__(self) -> None:
        self.count = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.count += 1


async def test_sends_and_requests_start_no_task_per_message_in_the_server(
        server: TrioRemotingServer, trio_bus: EventBus) -> None:
    # the clients are blocking ones, on threads of their own: the only trio loop counted is
    # the server's (this test's)
    def clients() -> tuple[RemotingClient, RemotingClient, BusClient, BusClient]:
        consumer_client = RemotingClient(ClientConfig()).start()
        sender_client = RemotingClient(ClientConfig()).start()
        consumer = BusClient(consumer_client, addr_of(server))
        sender = BusClient(sender_client, addr_of(server))
        consumer.consumer("echo", lambda m: m.reply(m.body) if m.reply_address else None)
        sender.send("echo", b"warm", timeout=WAIT)  # connections made, consumer registered
        sender.request("echo", b"warm", timeout=WAIT)
        return consumer_client, sender_client, consumer, sender

    consumer_client, sender_client, consumer, sender = await trio.to_thread.run_sync(clients)
    try:
        spawned = Spawned()
        trio.lowlevel.add_instrument(spawned)
        try:
            def traffic() -> list[bytes]:
                replies = []
                for i in range(MESSAGES):
                    sender.send("echo", b"%d" % i, timeout=WAIT)
                    replies.append(sender.request("echo", b"%d" % i, timeout=WAIT).body)
                return replies

            replies = await trio.to_thread.run_sync(traffic)
        finally:
            trio.lowlevel.remove_instrument(spawned)
        assert replies == [b"%d" % i for i in range(MESSAGES)]
        # a suspended processor would cost its reader a new task per send and per request
        # (2 x MESSAGES); the server's reply timer is started once, by the warm-up request
        assert spawned.count < MESSAGES // 4, spawned.count
    finally:
        def close() -> None:
            for bus_client in (sender, consumer):
                bus_client.close()
            for client in (sender_client, consumer_client):
                client.shutdown()

        await trio.to_thread.run_sync(close)


def test_a_request_nobody_replies_to_is_answered_timeout_by_the_server(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    silent, asking = bus_clients(), bus_clients()
    seen = Collected()
    silent.consumer("silent", seen.add)
    with pytest.raises(ReplyFailure) as info:
        asking.request("silent", b"x", timeout=0.3)
    assert info.value.kind == "TIMEOUT"
    # the server's answer (its reply address expired), not the client's own timeout, which
    # comes only after the transport's margin
    assert "waiting for a reply" in str(info.value), info.value
    assert len(seen.wait_for(1)) == 1  # it was delivered; only the reply is missing
    eventually(lambda: bus.statistics().pending_replies == 0, "the reply address forgotten")
    assert bus.statistics().timeouts >= 1


@pytest.mark.parametrize("bus", [{"max_queued_per_consumer": 3}], indirect=True)
def test_a_send_queued_until_its_deadline_is_answered_timeout_by_the_server(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    owner, sender = bus_clients(), bus_clients()
    handled = Collected()
    consumer = owner.consumer("slow", handled.add, max_buffered=1)
    consumer.pause()
    sender.send("slow", b"first", timeout=WAIT)  # in the consumer's buffer: the window is full
    with pytest.raises(ReplyFailure) as info:
        sender.send("slow", b"queued", timeout=0.3)
    assert info.value.kind == "TIMEOUT"
    assert "did not take the message in time" in str(info.value), info.value
    consumer.resume()
    sender.send("slow", b"after", timeout=WAIT)
    bodies = [message.body for message in handled.wait_for(2)]
    assert bodies == [b"first", b"after"]  # the one that timed out queued never came


def test_a_reply_to_a_requester_that_left_is_dropped_and_the_server_goes_on(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    owner = bus_clients()
    gate = threading.Event()
    replied = threading.Event()

    def late(message: Message) -> None:
        gate.wait(WAIT)
        message.reply(b"late")
        replied.set()

    owner.consumer("late", late)
    owner.consumer("echo", lambda message: message.reply(message.body))
    leaving = RemotingClient(ClientConfig()).start()
    requester = BusClient(leaving, blocking_server.addr)
    failures: list[BaseException] = []

    def ask() -> None:
        try:
            requester.request("late", b"x", timeout=WAIT)
        except BaseException as exc:  # its client is shut down under it
            failures.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    eventually(lambda: bus.statistics().pending_replies == 1, "the request held")
    requester.close()
    leaving.shutdown()  # the requester leaves before the reply comes
    thread.join(WAIT)
    assert failures and not thread.is_alive()
    eventually(lambda: bus.statistics().pending_replies == 0, "the requester's entry dropped")
    gate.set()
    assert replied.wait(WAIT)  # the reply finds no address: its answer is dropped
    assert bus_clients().request("echo", b"still", timeout=WAIT).body == b"still"
