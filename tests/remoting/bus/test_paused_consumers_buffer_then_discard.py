"""A consumer can pause: it keeps what arrives, up to ``max_buffered`` (the message its
handler runs included), and discards beyond, counting each discard and showing it to
``on_discard``; ``resume`` hands the kept messages out first, in order (Vert.x's
``MessageConsumer`` as a read stream)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import trio

from remoting.bus import BusClient, EventBus, Message, ReplyFailure

from .conftest import WAIT


def test_a_paused_consumer_keeps_then_discards_then_resumes_in_order(bus: EventBus) -> None:
    handled: list[bytes] = []
    discarded: list[bytes] = []
    all_handled = threading.Event()

    def handler(message: Message) -> None:
        handled.append(message.body)
        if len(handled) == 3:
            all_handled.set()

    consumer = bus.consumer("jobs", handler, max_buffered=3,
                            on_discard=lambda m: discarded.append(m.body))
    consumer.pause()
    for body in (b"1", b"2", b"3"):
        bus.send("jobs", body)
    assert consumer.buffered == 3 and handled == []
    with pytest.raises(ReplyFailure) as info:  # a send learns its message was discarded
        bus.send("jobs", b"4")
    assert info.value.kind == "RECIPIENT_FAILURE" and "full" in info.value.message
    bus.publish("jobs", b"5")  # a publish is discarded without a word
    assert consumer.discarded == 2
    consumer.resume()
    assert all_handled.wait(WAIT)
    assert handled == [b"1", b"2", b"3"]
    assert discarded == [b"4", b"5"]  # on_discard ran for each (before resume finished)
    stats = bus.statistics()
    assert (stats.discarded, stats.delivered) == (2, 3)


def test_a_request_to_a_full_consumer_fails_at_once(
        bus: EventBus, bus_clients: Callable[..., BusClient]) -> None:
    consumer = bus.consumer("jobs", lambda m: m.reply(b"done"), max_buffered=1)
    consumer.pause()
    bus.send("jobs", b"kept")
    with pytest.raises(ReplyFailure, match="RECIPIENT_FAILURE"):
        bus_clients().request("jobs", b"x", timeout=WAIT)


def test_pause_mid_stream_lets_the_running_message_finish(bus_clients: Callable[..., BusClient]
                                                          ) -> None:
    owner = bus_clients()
    entered, release, second = threading.Event(), threading.Event(), threading.Event()
    handled: list[bytes] = []

    def handler(message: Message) -> None:
        handled.append(message.body)
        if message.body == b"1":
            entered.set()
            release.wait(WAIT)
        else:
            second.set()

    consumer = owner.local_consumer("q", handler)
    owner.send("q", b"1")
    assert entered.wait(WAIT)
    consumer.pause()
    owner.send("q", b"2")
    release.set()
    assert consumer.buffered == 1  # whether "1" has finished yet or not, "2" waits
    consumer.resume()
    assert second.wait(WAIT)
    assert handled == [b"1", b"2"]


async def test_a_consumer_of_a_trio_server_pauses_alike(trio_bus: EventBus) -> None:
    handled: list[bytes] = []
    discarded: list[bytes] = []
    done = trio.Event()

    async def handler(message: Message) -> None:
        handled.append(message.body)
        if len(handled) == 2:
            done.set()

    async def on_discard(message: Message) -> None:
        discarded.append(message.body)

    consumer = trio_bus.consumer("jobs", handler, max_buffered=2, on_discard=on_discard)
    consumer.pause()
    await trio_bus.send_async("jobs", b"1")
    await trio_bus.send_async("jobs", b"2")
    trio_bus.publish("jobs", b"3")
    consumer.resume()
    with trio.fail_after(WAIT):
        await done.wait()
    assert handled == [b"1", b"2"] and consumer.discarded == 1
