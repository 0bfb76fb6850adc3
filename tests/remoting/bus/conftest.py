"""Fixtures: an `EventBus` on a real server (blocking and trio) and bus clients of it, all on
127.0.0.1; helpers that wait on events, never on sleeps."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from time import monotonic
from typing import Any

import pytest
import trio

from remoting import (
    ChannelHandle,
    ClientConfig,
    RemotingClient,
    RemotingServer,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting.bus import BusClient, EventBus, TrioBusClient

from ..conftest import addr_of

WAIT = 10.0  # seconds any event of these tests may take on a loaded machine


@pytest.fixture
def bus(request: pytest.FixtureRequest, blocking_server: RemotingServer) -> Iterator[EventBus]:
    """An EventBus on the blocking server (its options: the fixture's indirect param)."""
    event_bus = EventBus(**getattr(request, "param", {}))
    event_bus.attach(blocking_server)
    yield event_bus
    event_bus.close()


@pytest.fixture
def bus_clients(blocking_server: RemotingServer, bus: EventBus
                ) -> Iterator[Callable[..., BusClient]]:
    """Make bus clients of ``bus``, each over a RemotingClient of its own."""
    made: list[tuple[RemotingClient, BusClient]] = []

    def make(**options: object) -> BusClient:
        client = RemotingClient(ClientConfig()).start()
        bus_client = BusClient(client, blocking_server.addr, **options)  # type: ignore[arg-type]
        made.append((client, bus_client))
        return bus_client

    yield make
    for client, bus_client in made:
        bus_client.close()
        client.shutdown()


@pytest.fixture
async def trio_bus(server: TrioRemotingServer) -> EventBus:
    event_bus = EventBus()
    event_bus.attach(server)
    return event_bus


@pytest.fixture
async def trio_bus_clients(nursery: trio.Nursery, server: TrioRemotingServer,
                           trio_bus: EventBus
                           ) -> AsyncIterator[Callable[[], Awaitable[TrioBusClient]]]:
    """Make trio bus clients of ``trio_bus``, each over a TrioRemotingClient of its own."""
    made: list[TrioBusClient] = []

    async def make() -> TrioBusClient:
        client = TrioRemotingClient(ClientConfig())
        await nursery.start(client.serve)
        bus_client = TrioBusClient(client, addr_of(server))
        made.append(bus_client)
        return bus_client

    yield make
    for bus_client in made:
        await bus_client.aclose()


class Closed:
    """A channel event listener that tells when a server saw a connection close: registered
    after the bus's, it hears of each close after the bus has handled it."""

    def __init__(self) -> None:
        self.closed = threading.Event()  # set at the first close
        self._count = 0
        self._changed = threading.Condition()

    def on_channel_close(self, remote_addr: str, channel: ChannelHandle) -> None:
        with self._changed:
            self._count += 1
            self._changed.notify_all()
        self.closed.set()

    def wait_for(self, closes: int, timeout: float = 10.0) -> bool:
        """Wait (bounded) until the server saw ``closes`` connections close."""
        with self._changed:
            return self._changed.wait_for(lambda: self._count >= closes, timeout)

    def on_channel_connect(self, remote_addr: str, channel: ChannelHandle) -> None:
        pass

    def on_channel_exception(self, remote_addr: str, channel: ChannelHandle) -> None:
        pass

    def on_channel_idle(self, remote_addr: str, channel: ChannelHandle) -> None:
        pass


class Collected:
    """What handlers saw, from any thread; `wait_for` waits (bounded) until enough came."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._changed = threading.Condition()

    def add(self, item: Any) -> None:
        with self._changed:
            self.items.append(item)
            self._changed.notify_all()

    def wait_for(self, count: int) -> list[Any]:
        """Return the items once there are ``count`` of them (fails the test after `WAIT`)."""
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.items) >= count, WAIT), self.items
            return list(self.items)


def eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait, up to `WAIT` seconds, for ``condition`` (state another process or thread
    changes, with no event to wait on) to hold; fail the test if it does not."""
    deadline = monotonic() + WAIT
    look = threading.Event()
    while not condition():
        assert monotonic() < deadline, f"{what}: not within {WAIT}s"
        look.wait(0.005)

