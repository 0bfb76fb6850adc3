"""A consumer holds at most ``max_buffered_bytes`` of messages (bodies and headers, the one its
handler runs included; one larger message alone), besides ``max_buffered`` messages: beyond,
a message is discarded as for a full consumer (a send fails as RECIPIENT_FAILURE, a publish
is dropped). Both faces; a remote consumer and one of the server's own.

The review's case: the bound was a count only, so a stuck consumer could hold 1,000 messages
of 16 MiB; 26 sends of 15 MiB grew its client by 331 MiB.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import pytest

from remoting import RemotingServer
from remoting.bus import (
    DEFAULT_MAX_BUFFERED_BYTES,
    BusClient,
    EventBus,
    Message,
    ReplyFailure,
    TrioBusClient,
)

from .conftest import WAIT

KIB = 1024
MIB = 1024 * KIB


def test_a_paused_remote_consumer_holds_its_bytes_and_discards_beyond(
        bus_clients: Callable[..., BusClient]) -> None:
    owner, sender = bus_clients(), bus_clients()
    handled: list[int] = []
    done = threading.Event()

    def handler(message: Message) -> None:
        handled.append(len(message.body))
        if len(handled) == 4:
            done.set()

    consumer = owner.consumer("big", handler, max_buffered_bytes=MIB)
    consumer.pause()
    for _ in range(4):
        sender.send("big", b"x" * (256 * KIB), timeout=WAIT)
    for _ in range(16):
        with pytest.raises(ReplyFailure, match="RECIPIENT_FAILURE: the consumer of big is full"):
            sender.send("big", b"x" * (256 * KIB), timeout=WAIT)
    assert (consumer.buffered, consumer.buffered_bytes) == (4, MIB)  # 4 x 256 KiB, no more
    assert consumer.discarded == 16
    consumer.resume()
    assert done.wait(WAIT)
    assert handled == [256 * KIB] * 4
    sender.send("big", b"y" * (256 * KIB), timeout=WAIT)  # room again


def test_the_default_bound_stops_a_stuck_consumer_short_of_the_reviews_growth(
        bus_clients: Callable[..., BusClient]) -> None:
    owner, sender = bus_clients(), bus_clients()
    consumer = owner.consumer("stuck", lambda m: None)
    consumer.pause()  # stuck: it takes nothing
    refused = 0
    for _ in range(6):
        try:
            sender.send("stuck", b"x" * (15 * MIB), timeout=WAIT)
        except ReplyFailure:
            refused += 1
    assert consumer.max_buffered_bytes == DEFAULT_MAX_BUFFERED_BYTES == 64 * MIB
    assert consumer.buffered_bytes == 4 * 15 * MIB <= DEFAULT_MAX_BUFFERED_BYTES  # was 6 x 15
    assert (consumer.buffered, refused) == (4, 2)


def test_a_message_larger_than_the_bound_is_taken_when_nothing_is_held(
        bus_clients: Callable[..., BusClient]) -> None:
    owner, sender = bus_clients(), bus_clients()
    consumer = owner.consumer("one", lambda m: None, max_buffered_bytes=KIB)
    consumer.pause()
    sender.send("one", b"x" * (64 * KIB), headers={"k": "v"}, timeout=WAIT)
    assert consumer.buffered_bytes == 64 * KIB + 2  # the headers count too
    with pytest.raises(ReplyFailure, match="is full"):
        sender.send("one", b"y", timeout=WAIT)


def test_the_servers_own_consumer_and_a_lower_bound_set_while_it_runs(
        blocking_server: RemotingServer, bus: EventBus) -> None:
    consumer = bus.consumer("local", lambda m: None, max_buffered_bytes=10 * KIB)
    consumer.pause()
    for _ in range(2):
        bus.send("local", b"x" * (4 * KIB), timeout=WAIT)
    with pytest.raises(ReplyFailure, match="is full"):  # 12 KiB would be held
        bus.send("local", b"x" * (4 * KIB), timeout=WAIT)
    assert (consumer.buffered_bytes, consumer.discarded) == (8 * KIB, 1)
    consumer.max_buffered_bytes = KIB  # keeps what it holds, takes nothing more
    assert consumer.buffered_bytes == 8 * KIB
    dropped: list[bytes] = []
    consumer.on_discard = lambda m: dropped.append(m.body)
    bus.publish("local", b"z")  # a publish is dropped, silently to its sender
    assert consumer.discarded == 2
    with pytest.raises(ValueError, match="max_buffered_bytes must be >= 1"):
        consumer.max_buffered_bytes = 0
    with pytest.raises(TypeError, match="max_buffered_bytes must be an int"):
        bus.consumer("other", lambda m: None, max_buffered_bytes=1.5)  # type: ignore[arg-type]


async def test_a_trio_consumer_is_bounded_alike(
        trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    owner, sender = await trio_bus_clients(), await trio_bus_clients()
    consumer = await owner.consumer("big", lambda m: None, max_buffered_bytes=100 * KIB)
    consumer.pause()
    outcomes = []
    for _ in range(4):
        try:
            await sender.send("big", b"x" * (40 * KIB), timeout=WAIT)
            outcomes.append("taken")
        except ReplyFailure:
            outcomes.append("full")
    assert outcomes == ["taken", "taken", "full", "full"]
    assert consumer.buffered_bytes == 80 * KIB
