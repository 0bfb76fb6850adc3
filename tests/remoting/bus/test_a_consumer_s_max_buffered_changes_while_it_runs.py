"""A consumer's ``max_buffered`` may change while it runs (Vert.x's
``setMaxBufferedMessages``): a larger bound takes more at once, and a remote consumer's bus
server pushes up to the new window (what it queued comes now); a smaller one keeps what is
held (nothing is dropped) and takes new messages once under it, and the server pushes no more
than the new window. A consumer registered again after a lost connection keeps its window
counting the messages it still holds, so the server does not push it into discarding."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import pytest

from remoting import RemotingServer
from remoting.bus import BusClient, EventBus, Message, TrioBusClient

from .conftest import WAIT, Closed, Collected, eventually

QUEUED = {"max_queued_per_consumer": 3}


def test_a_server_consumer_s_bound_grows_and_shrinks(bus: EventBus) -> None:
    handled = Collected()
    consumer = bus.consumer("jobs", lambda m: handled.add(m.body), max_buffered=2)
    consumer.pause()
    for i in range(3):
        bus.publish("jobs", b"%d" % i)
    assert (consumer.buffered, consumer.discarded) == (2, 1)
    consumer.max_buffered = 4
    bus.publish("jobs", b"3")
    bus.publish("jobs", b"4")
    assert (consumer.max_buffered, consumer.buffered, consumer.discarded) == (4, 4, 1)
    consumer.max_buffered = 1  # below what it holds: it keeps them, takes nothing new
    bus.publish("jobs", b"5")
    assert (consumer.buffered, consumer.discarded) == (4, 2)
    consumer.resume()
    assert handled.wait_for(4) == [b"0", b"1", b"3", b"4"]
    bus.send("jobs", b"6", timeout=WAIT)  # under the bound again
    assert handled.wait_for(5)[-1] == b"6"
    with pytest.raises(ValueError, match="max_buffered"):
        consumer.max_buffered = 0
    with pytest.raises(TypeError):
        consumer.max_buffered = "3"  # type: ignore[assignment]


@pytest.mark.parametrize("bus", [QUEUED], indirect=True)
def test_a_remote_consumer_s_server_follows_its_new_window(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    owner, publisher = bus_clients(), bus_clients()
    handled = Collected()
    consumer = owner.consumer("slow", lambda m: handled.add(m.body), max_buffered=2)
    consumer.pause()
    for i in range(6):
        publisher.publish("slow", b"%d" % i)
    eventually(lambda: consumer.buffered == 2, "a window of 2 pushed")
    assert (bus.statistics().queued, bus.statistics().dropped) == (3, 1)
    consumer.max_buffered = 5  # the server pushes the 3 it queued
    eventually(lambda: consumer.buffered == 5 and bus.statistics().queued == 0,
               "the larger window filled")
    consumer.max_buffered = 1  # the server learns it; the 5 held stay
    eventually(lambda: _window(bus) == 1, "the server has the new window")
    consumer.resume()
    assert handled.wait_for(5) == [b"0", b"1", b"2", b"3", b"4"]
    consumer.pause()
    publisher.send("slow", b"in", timeout=WAIT)  # one in the window of 1
    stopped = threading.Event()

    def send_then_stop() -> None:
        publisher.send("slow", b"queued", timeout=WAIT)
        stopped.set()

    queued = threading.Thread(target=send_then_stop)
    queued.start()
    eventually(lambda: bus.statistics().queued == 1, "the second one queued at the server")
    assert consumer.buffered == 1 and consumer.discarded == 0
    consumer.resume()
    queued.join(WAIT)
    assert stopped.is_set() and handled.wait_for(7)[5:] == [b"in", b"queued"]


def _window(bus: EventBus) -> int:
    (target,) = bus._node.shared.all("slow")
    return target.outlet.window  # type: ignore[union-attr]


async def test_a_trio_consumer_s_server_follows_its_new_window(
        trio_bus: EventBus, trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    owner, publisher = await trio_bus_clients(), await trio_bus_clients()
    handled: list[bytes] = []
    consumer = await owner.consumer("t", lambda m: handled.append(m.body), max_buffered=1)
    consumer.pause()
    await publisher.send("t", b"a", timeout=WAIT)
    consumer.max_buffered = 3
    await publisher.send("t", b"b", timeout=WAIT)  # the larger window takes them at once
    await publisher.send("t", b"c", timeout=WAIT)
    assert consumer.buffered == 3 and consumer.discarded == 0


def test_a_consumer_registered_again_keeps_counting_what_it_holds(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    closed = Closed()
    blocking_server.register_channel_event_listener(closed)
    owner, publisher = bus_clients(), bus_clients()
    handled = Collected()

    def handler(message: Message) -> None:
        handled.add(message.body)

    consumer = owner.consumer("kept", handler, max_buffered=3)
    consumer.pause()
    for i in range(3):
        publisher.send("kept", b"%d" % i, timeout=WAIT)
    assert consumer.buffered == 3  # its window is full, held by the paused consumer
    channels = blocking_server.channels()
    for channel in channels:
        channel.close()  # the server drops the clients (a restart, a network fault)
    # both closes seen: the old registration is gone (the first close alone may be the
    # publisher's, and the consumer still registered over the old connection)
    assert closed.wait_for(len(channels), WAIT)
    eventually(lambda: bus.statistics().remote_consumers == 1, "registered again")
    for i in range(3, 6):  # the window is still full: the server queues them
        publisher.publish("kept", b"%d" % i)
    # a publish is not answered: the server may not have read them yet (it flaked under load)
    eventually(lambda: bus.statistics().queued == 3, "the three queued")
    assert consumer.discarded == 0
    consumer.resume()  # the held ones, then the queued ones as credits come
    assert handled.wait_for(6) == [b"%d" % i for i in range(6)]
    assert consumer.discarded == 0

