"""A publish reaches every consumer of its address once, in the server and in every client
(the publisher's local consumers included); a publish that reaches none is counted, no error
(as Vert.x)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import trio

from remoting.bus import BusClient, EventBus, Message, TrioBusClient

from .conftest import WAIT


class Inbox:
    """Collects bodies from any thread; tells when it holds ``expected`` of them."""

    def __init__(self, expected: int) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        self.expected = expected
        self.full = threading.Event()
        self._lock = threading.Lock()

    def handler(self, name: str) -> Callable[[Message], None]:
        def handle(message: Message) -> None:
            assert message.kind == "publish" and not message.is_send
            with self._lock:
                self.bodies.append((name, message.body))
                if len(self.bodies) >= self.expected:
                    self.full.set()
        return handle


def test_a_publish_reaches_the_server_every_client_and_the_publisher_s_local_consumers(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    publisher, a, b = bus_clients(), bus_clients(), bus_clients()
    inbox = Inbox(expected=5)
    bus.consumer("news", inbox.handler("server"))
    a.consumer("news", inbox.handler("a1"))
    a.consumer("news", inbox.handler("a2"))
    b.consumer("news", inbox.handler("b"))
    publisher.local_consumer("news", inbox.handler("local"))
    b.consumer("other", inbox.handler("other"))
    publisher.publish("news", b"extra!")
    assert inbox.full.wait(WAIT)
    assert sorted(inbox.bodies) == sorted(
        (name, b"extra!") for name in ("server", "a1", "a2", "b", "local"))
    assert bus.statistics().unrouted_publishes == 0


def test_a_publish_to_no_consumer_is_counted_and_no_error(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    client = bus_clients()
    client.publish("void", b"x")
    bus.publish("void", b"x")
    assert bus.statistics().unrouted_publishes == 2


def test_the_server_publishes_to_its_clients_in_order(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    client = bus_clients()
    inbox = Inbox(expected=50)
    client.consumer("ticks", inbox.handler("c"))
    for i in range(50):
        bus.publish("ticks", str(i).encode())
    assert inbox.full.wait(WAIT)
    assert [body for _, body in inbox.bodies] == [str(i).encode() for i in range(50)]


async def test_the_trio_faces_publish_alike(
        trio_bus: EventBus, trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    publisher, listener = await trio_bus_clients(), await trio_bus_clients()
    got: list[bytes] = []
    done = trio.Event()

    async def handle(message: Message) -> None:
        got.append(message.body)
        if len(got) == 3:
            done.set()

    await listener.consumer("news", handle)
    trio_bus.consumer("news", handle)
    await publisher.local_consumer("news", handle)
    await publisher.publish("news", b"hi")
    with trio.fail_after(WAIT):
        await done.wait()
    assert got == [b"hi"] * 3
