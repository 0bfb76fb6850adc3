"""The trio face under pressure, as the blocking one: a paused consumer of a `TrioBusClient`
gets its window, the server queues its bound and drops the rest, credits bring the queued
ones in order; a trio client that goes away fails the requests its handler held."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from remoting import ClientConfig, TrioRemotingClient, TrioRemotingServer
from remoting.bus import EventBus, Message, ReplyFailure, TrioBusClient

from ..conftest import addr_of
from .conftest import WAIT, Closed


async def test_a_paused_trio_consumer_is_held_to_its_window_and_the_queue(
        trio_bus: EventBus, trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    owner, publisher = await trio_bus_clients(), await trio_bus_clients()
    handled: list[bytes] = []
    enough = trio.Event()
    expected = [0]

    async def handler(message: Message) -> None:
        handled.append(message.body)
        if len(handled) == expected[0]:
            enough.set()

    consumer = await owner.consumer("slow", handler, max_buffered=4)
    consumer.pause()
    for i in range(30):
        await publisher.publish("slow", b"%d" % i)
    stats = trio_bus.statistics()
    assert stats.queued + stats.dropped == 26 and stats.queued <= 1000
    expected[0] = 30 - stats.dropped
    consumer.resume()
    with trio.fail_after(WAIT):
        await enough.wait()
    assert handled == [b"%d" % i for i in range(expected[0])]  # in order, none lost
    enough = trio.Event()
    expected[0] += 1
    await publisher.send("slow", b"after", timeout=WAIT)  # credits flowed: room again
    with trio.fail_after(WAIT):
        await enough.wait()
    assert handled[-1] == b"after"


async def test_a_trio_client_going_away_fails_the_request_its_handler_held(
        nursery: trio.Nursery, server: TrioRemotingServer, trio_bus: EventBus,
        trio_bus_clients: Callable[[], Awaitable[TrioBusClient]]) -> None:
    asker = await trio_bus_clients()
    closed = Closed()
    server.register_channel_event_listener(closed)  # after the bus's listener
    holder_client = TrioRemotingClient(ClientConfig())
    holder_scope = trio.CancelScope()
    entered = trio.Event()

    async def run_holder(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                         ) -> None:
        with holder_scope:
            await holder_client.serve(task_status=task_status)

    await nursery.start(run_holder)
    holder = TrioBusClient(holder_client, addr_of(server))

    async def stuck(message: Message) -> None:
        entered.set()
        await trio.sleep_forever()

    await holder.consumer("h", stuck)
    failures: list[ReplyFailure] = []

    async def ask() -> None:
        with pytest.raises(ReplyFailure) as info:
            await asker.request("h", b"r", timeout=300)
        failures.append(info.value)

    async with trio.open_nursery() as asking:
        asking.start_soon(ask)
        with trio.fail_after(WAIT):
            await entered.wait()
        holder_scope.cancel()  # the holder's client stops: its connection closes
    assert failures[0].kind == "RECIPIENT_FAILURE"  # long before 300 s
    assert await trio.to_thread.run_sync(closed.closed.wait, WAIT)
    assert trio_bus.statistics().remote_consumers == 0
