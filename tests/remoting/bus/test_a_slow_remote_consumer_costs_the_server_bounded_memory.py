"""Back-pressure end to end: a paused or slow consumer in a client gets at most its
``max_buffered`` messages; the bus server queues at most ``max_queued_per_consumer`` more
for it, then fails sends (RECIPIENT_FAILURE) and drops publishes (counted). When the
consumer catches up, its credits bring the queued messages, in order; a queued send whose
sender gave up is never delivered."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from remoting.bus import BusClient, EventBus, Message, ReplyFailure

from .conftest import WAIT, eventually

QUEUED = {"max_queued_per_consumer": 3}


class Handled:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.changed = threading.Condition()

    def __call__(self, message: Message) -> None:
        with self.changed:
            self.bodies.append(message.body)
            self.changed.notify_all()

    def wait_for(self, count: int) -> list[bytes]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.bodies) >= count, WAIT), self.bodies
            return list(self.bodies)


@pytest.mark.parametrize("bus", [QUEUED], indirect=True)
def test_a_flood_to_a_paused_consumer_is_held_to_window_plus_queue(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    owner, publisher = bus_clients(), bus_clients()
    handled = Handled()
    consumer = owner.consumer("slow", handled, max_buffered=2)
    consumer.pause()
    for i in range(1000):
        publisher.publish("slow", b"%d" % i)
        assert bus.statistics().queued <= 3
    stats = bus.statistics()
    assert (stats.queued, stats.dropped) == (3, 995)  # 2 pushed to the consumer, 3 queued
    with pytest.raises(ReplyFailure) as info:  # a send is refused at once, not queued
        publisher.send("slow", b"refused", timeout=WAIT)
    assert info.value.kind == "RECIPIENT_FAILURE"
    consumer.resume()
    assert handled.wait_for(5) == [b"0", b"1", b"2", b"3", b"4"]
    publisher.send("slow", b"after", timeout=WAIT)  # room again: delivered
    assert handled.wait_for(6)[-1] == b"after"
    assert bus.statistics().queued == 0


@pytest.mark.parametrize("bus", [QUEUED], indirect=True)
def test_a_queued_send_waits_for_room_and_returns_once_delivered(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    owner, sender = bus_clients(), bus_clients()
    handled = Handled()
    consumer = owner.consumer("slow", handled, max_buffered=1)
    consumer.pause()
    sender.send("slow", b"first", timeout=WAIT)  # in the consumer's buffer
    returned = threading.Event()
    failures: list[BaseException] = []

    def second() -> None:
        try:
            sender.send("slow", b"second", timeout=WAIT)
        except BaseException as exc:
            failures.append(exc)
        returned.set()

    thread = threading.Thread(target=second)
    thread.start()
    eventually(lambda: bus.statistics().queued == 1, "the second send queued")
    assert not returned.is_set()  # queued at the server: its sender waits
    consumer.resume()
    assert returned.wait(WAIT) and not failures
    assert handled.wait_for(2) == [b"first", b"second"]
    thread.join(WAIT)


@pytest.mark.parametrize("bus", [QUEUED], indirect=True)
def test_a_send_that_timed_out_queued_is_never_delivered(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    owner, sender = bus_clients(), bus_clients()
    handled = Handled()
    consumer = owner.consumer("slow", handled, max_buffered=1)
    consumer.pause()
    sender.send("slow", b"first", timeout=WAIT)
    with pytest.raises(ReplyFailure) as info:
        sender.send("slow", b"gave up", timeout=0.3)
    assert info.value.kind == "TIMEOUT"
    consumer.resume()
    sender.send("slow", b"third", timeout=WAIT)
    assert handled.wait_for(2) == [b"first", b"third"]
