"""A connection's subscriptions together hold at most ``max_in_flight_per_connection``
unacknowledged deliveries (NSQ's ``--max-rdy-count``), over real sockets: a client that
subscribes many times with large credits and never acknowledges is handed the bound and no
more; acknowledgements, or its connection closing, let delivery go on with every message
delivered once; another connection is not slowed by the first being at its bound."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from remoting import (
    RemotingClient,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting.queue import (
    QueueClient,
    QueueService,
    TrioDelivery,
    TrioQueueClient,
    TrioSubscription,
)

from ..logs import capture_logs
from .conftest import serving

if TYPE_CHECKING:
    from collections.abc import Iterator

BOUND = 40
CREDITS = 1000  # each subscription's: together far above the bound
MESSAGES = 300  # per channel
TOPIC = "jobs"


class Tally:
    """Deliveries a connection received, and an event once there are ``target`` of them."""

    def __init__(self, target: int) -> None:
        self.got: list[tuple[str, TrioDelivery]] = []  # (channel, delivery)
        self.target = target
        self.reached = trio.Event()

    def add(self, channel: str, msg: TrioDelivery) -> None:
        self.got.append((channel, msg))
        if len(self.got) >= self.target:
            self.reached.set()


def _in_flight(service: QueueService) -> int:
    """Deliveries in flight on every channel (read on the loop: the trio server's)."""
    return sum(len(c.queue.in_flight) for t in service.broker.topics.values()
               for c in t.channels.values())


def _held_by_connection(service: QueueService) -> list[int]:
    return [s.deliveries.held for s in service.broker.subscribers.values()]


async def _serve(nursery: trio.Nursery, service: QueueService) -> str:
    server = TrioRemotingServer(ServerConfig())
    service.attach(server)
    port = await nursery.start(server.serve)
    return f"127.0.0.1:{port}"


async def _client(nursery: trio.Nursery) -> TrioQueueClient:
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    return QueueClient(client)


async def _collect(sub: TrioSubscription, tally: Tally, service: QueueService,
                   ack: bool) -> None:
    async for msg in sub:
        # never more than the bound on one connection, at any delivery
        assert max(_held_by_connection(service)) <= BOUND
        tally.add(sub.channel, msg)
        if ack:
            await msg.ack()


async def _hold(addr: str, channels: list[str], tally: Tally, service: QueueService, *,
                task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """A client of its own (one connection) subscribing to each of ``channels`` with large
    credits and never acknowledging; ends (its connection closed) when cancelled."""
    async with trio.open_nursery() as nursery:
        q = await _client(nursery)
        async with AsyncExitStack() as stack:
            for channel in channels:
                sub = await stack.enter_async_context(
                    q.subscribe(addr, TOPIC, channel, credits=CREDITS))
                nursery.start_soon(_collect, sub, tally, service, False)
            task_status.started()
            await trio.sleep_forever()


async def _at_bound(tally: Tally) -> None:
    with trio.fail_after(10):
        await tally.reached.wait()
    await trio.testing.wait_all_tasks_blocked(cushion=0.1)  # anything more would have come


async def test_a_connection_subscribing_many_times_is_handed_the_bound_and_no_more(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=60.0, max_in_flight_per_connection=BOUND)
    addr = await _serve(nursery, service)
    q = await _client(nursery)
    channels = [f"c{i}" for i in range(8)]
    await q.publish_many(addr, TOPIC, [b"%d" % i for i in range(MESSAGES)])
    tally = Tally(BOUND)
    async with trio.open_nursery() as hostile:
        await hostile.start(_hold, addr, channels, tally, service)
        await _at_bound(tally)
        assert len(tally.got) == BOUND
        assert _in_flight(service) == BOUND and _held_by_connection(service) == [BOUND]
        # the credits stay with the subscriptions: none was taken or refused
        consumers = service.broker.consumers.values()
        assert sum(c.stream.credits for c in consumers) == len(channels) * CREDITS - BOUND
        stats = await q.statistics(addr, TOPIC)  # through the wire: its JSON carries them
        assert (stats.connections_at_bound, stats.times_at_bound) == (1, 1)
        assert sum(c.delivered for c in stats.topics[TOPIC].channels.values()) == BOUND
        hostile.cancel_scope.cancel()


async def test_acknowledgements_let_delivery_go_on_and_every_message_comes_once(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=60.0, max_in_flight_per_connection=BOUND)
    addr = await _serve(nursery, service)
    q = await _client(nursery)
    channels = [f"c{i}" for i in range(4)]
    await q.create_topic(addr, TOPIC)
    tally = Tally(len(channels) * MESSAGES)
    async with AsyncExitStack() as stack, trio.open_nursery() as readers:
        for channel in channels:
            sub = await stack.enter_async_context(
                q.subscribe(addr, TOPIC, channel, credits=CREDITS, ack_window=0.01))
            readers.start_soon(_collect, sub, tally, service, True)
        await q.publish_many(addr, TOPIC, [b"%d" % i for i in range(MESSAGES)])
        with trio.fail_after(30):
            await tally.reached.wait()
        readers.cancel_scope.cancel()
    await trio.testing.wait_all_tasks_blocked()  # the service saw the subscriptions end
    by_channel: dict[str, list[int]] = {c: [] for c in channels}
    for channel, msg in tally.got:
        assert msg.attempts == 1
        by_channel[channel].append(msg.offset)
    assert all(sorted(got) == list(range(MESSAGES)) for got in by_channel.values())
    stats = service.statistics(TOPIC)
    for channel in channels:
        counts = stats.topics[TOPIC].channels[channel]
        assert (counts.delivered, counts.finished, counts.in_flight) == (MESSAGES, MESSAGES, 0)
    assert stats.times_at_bound >= 1 and stats.connections_at_bound == 0
    assert service.broker.subscribers == {}


async def test_closing_the_connection_gives_its_deliveries_back_none_lost(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=60.0, max_in_flight_per_connection=BOUND)
    addr = await _serve(nursery, service)
    q = await _client(nursery)
    channels = [f"c{i}" for i in range(4)]
    await q.create_topic(addr, TOPIC)
    tally = Tally(BOUND)
    async with trio.open_nursery() as hostile:
        await hostile.start(_hold, addr, channels, tally, service)
        await q.publish_many(addr, TOPIC, [b"%d" % i for i in range(MESSAGES)])
        await _at_bound(tally)
        assert len(tally.got) == BOUND and _held_by_connection(service) == [BOUND]
        hostile.cancel_scope.cancel()  # its connection closes
    held = {(channel, m.offset) for channel, m in tally.got}
    after = Tally(len(channels) * MESSAGES)
    async with AsyncExitStack() as stack, trio.open_nursery() as readers:
        for channel in channels:
            sub = await stack.enter_async_context(
                q.subscribe(addr, TOPIC, channel, credits=64, ack_window=0.01))
            readers.start_soon(_collect, sub, after, service, True)
        with trio.fail_after(30):
            await after.reached.wait()
        readers.cancel_scope.cancel()
    await trio.testing.wait_all_tasks_blocked()  # the service saw the subscriptions end
    seen: dict[str, list[int]] = {c: [] for c in channels}
    for channel, msg in after.got:
        seen[channel].append(msg.offset)
        assert msg.attempts == (2 if (channel, msg.offset) in held else 1)
    assert all(sorted(got) == list(range(MESSAGES)) for got in seen.values())
    assert _in_flight(service) == 0 and service.broker.subscribers == {}


async def test_another_connection_is_not_slowed_by_one_at_its_bound(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=60.0, max_in_flight_per_connection=BOUND)
    addr = await _serve(nursery, service)
    q = await _client(nursery)
    await q.create_topic(addr, TOPIC)
    tally = Tally(BOUND)
    async with trio.open_nursery() as hostile:
        await hostile.start(_hold, addr, ["h0", "h1", "h2", "h3"], tally, service)
        await q.publish_many(addr, TOPIC, [b"%d" % i for i in range(MESSAGES)])
        await _at_bound(tally)
        got: list[int] = []
        with trio.fail_after(30):
            async with q.subscribe(addr, TOPIC, "b", credits=64, ack_window=0.01) as sub:
                async for msg in sub:
                    got.append(msg.offset)
                    await msg.ack()
                    if len(got) == MESSAGES:
                        break
        assert got == list(range(MESSAGES))
        assert len(tally.got) == BOUND  # the first connection is still at its bound
        assert max(_held_by_connection(service)) == BOUND
        hostile.cancel_scope.cancel()


async def test_timeouts_and_requeues_give_the_connection_room_again(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=0.3, max_in_flight_per_connection=5)
    addr = await _serve(nursery, service)
    q = await _client(nursery)
    await q.publish_many(addr, TOPIC, [b"%d" % i for i in range(20)])
    async with q.subscribe(addr, TOPIC, "c", credits=100, ack_window=0.01) as sub:
        with trio.fail_after(10):
            first = [await sub.receive() for _ in range(5)]  # the bound; none acknowledged
            again = [await sub.receive() for _ in range(5)]  # each came back at its timeout
        assert [m.offset for m in first if m] == [m.offset for m in again if m] == [0, 1, 2, 3, 4]
        assert all(m is not None and m.attempts == 2 for m in again)
        assert service.statistics(TOPIC).topics[TOPIC].channels["c"].timed_out == 5
        assert again[0] is not None
        await again[0].requeue()  # room for one more: it comes again (or, should the
        with trio.fail_after(10):  # others time out first, one of them)
            after = await sub.receive()
        assert after is not None and after.offset in range(5) and after.attempts == 3
        assert max(_held_by_connection(service)) <= 5


@pytest.fixture
def bounded_server() -> Iterator[tuple[QueueService, RemotingServer]]:
    with serving(QueueService(msg_timeout=60.0, max_in_flight_per_connection=1)) as served:
        yield served


def test_credits_above_the_bound_are_not_an_error_and_the_pause_is_logged_sparingly(
        bounded_server: tuple[QueueService, RemotingServer]) -> None:
    service, server = bounded_server
    client = RemotingClient().start()
    try:
        q = QueueClient(client)
        q.publish_many(server.addr, TOPIC, [b"%d" % i for i in range(9)])
        with capture_logs() as events, q.subscribe(server.addr, TOPIC, "c",
                                                  credits=100) as sub:
            offsets = []
            for _ in range(9):  # each delivery reaches the bound of 1; its ack ends it
                msg = sub.receive(10)
                assert msg is not None
                offsets.append(msg.offset)
                assert service.statistics(TOPIC).topics[TOPIC].channels["c"].in_flight == 1
                msg.ack()
                sub.flush()
        assert offsets == list(range(9))
        paused = [e for e in events if e["event"] == "queue.deliveries_paused"]
        assert [e["paused_on_connection"] for e in paused] == [1, 2, 4, 8]
        assert all(e["log_level"] == "warning" and e["in_flight"] == 1 for e in paused)
        assert service.statistics().times_at_bound == 9
    finally:
        client.shutdown()


@pytest.mark.parametrize(("bad", "error"), [(0, ValueError), (-1, ValueError),
                                            (True, TypeError), (1.5, TypeError)])
def test_a_bound_that_is_not_a_positive_int_is_refused(bad: object,
                                                       error: type[Exception]) -> None:
    with pytest.raises(error, match="max_in_flight_per_connection"):
        QueueService(max_in_flight_per_connection=bad)  # type: ignore[arg-type]
