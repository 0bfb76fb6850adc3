"""The queue service's three ways to consume (real sockets, both faces): a subscription to a
channel (acknowledged deliveries), a group's pulls with committed offsets, and reads from an
offset; channels each get every message, consumers of one channel share them."""

from __future__ import annotations

import trio
import trio.testing

from remoting import RemotingServer
from remoting.queue import BlockingQueueClient, QueueService, TrioQueueClient


def test_a_subscriber_receives_every_message_in_order_with_its_headers(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    service, server = queue_server
    first = q.publish(server.addr, "orders", b"first", {"kind": "a", "\u00e9": "\u2603"})
    rest = q.publish_many(server.addr, "orders", [b"m%d" % i for i in range(999)])
    assert first == 0 and rest == list(range(1, 1000))
    seen = []
    with q.subscribe(server.addr, "orders", "billing", credits=32) as sub:
        for msg in sub:
            seen.append(msg)
            msg.ack()
            if len(seen) == 1000:
                break
    assert [m.offset for m in seen] == list(range(1000))
    assert seen[0].headers == {"kind": "a", "\u00e9": "\u2603"} and seen[0].body == b"first"
    assert seen[0].id == "orders@0" and seen[5].attempts == 1 and seen[5].timestamp > 0
    assert sub.acked == 1000 and sub.refused == 0
    channel = service.statistics("orders").topics["orders"].channels["billing"]
    assert (channel.finished, channel.in_flight, channel.depth) == (1000, 0, 0)


def test_each_channel_gets_a_copy_and_a_channels_consumers_share_it(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    _, server = queue_server
    q.publish_many(server.addr, "t", [b"%d" % i for i in range(100)])
    with q.subscribe(server.addr, "t", "shared", credits=10) as one, \
            q.subscribe(server.addr, "t", "shared", credits=10) as two, \
            q.subscribe(server.addr, "t", "own", credits=100) as own:
        got_one = [one.receive(5) for _ in range(10)]
        got_two = [two.receive(5) for _ in range(10)]
        got_own = [own.receive(5) for _ in range(100)]
    shared = {m.offset for m in got_one + got_two if m is not None}
    assert len(shared) == 20  # the two compete: no message twice
    assert [m.offset for m in got_own if m is not None] == list(range(100))


def test_a_group_pulls_from_its_committed_offset(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    _, server = queue_server
    q.publish_many(server.addr, "log", [b"%d" % i for i in range(10)])
    first = q.pull(server.addr, "log", "readers", max_messages=4, max_wait=0)
    assert [m.offset for m in first] == [0, 1, 2, 3]
    assert [m.offset for m in q.pull(server.addr, "log", "readers", 4, 0)] == [0, 1, 2, 3]
    q.commit(server.addr, "log", "readers", first[-1].offset + 1)
    assert [m.body for m in q.pull(server.addr, "log", "readers", 100, 0)] == [
        b"%d" % i for i in range(4, 10)]
    assert [m.offset for m in q.pull(server.addr, "log", offset=8, max_wait=0)] == [8, 9]
    offsets = q.offsets(server.addr, "log")
    assert (offsets.earliest, offsets.end, offsets.groups) == (0, 10, {"readers": 4})
    stats = q.statistics(server.addr, "log").topics["log"]
    assert stats.groups["readers"].lag == 6 and stats.end == 10


async def test_a_held_pull_is_answered_by_a_publish(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    service, addr, q = trio_queue
    await q.create_topic(addr, "news")
    answers: list[list[bytes]] = []

    async def pull() -> None:
        answers.append([m.body for m in await q.pull(addr, "news", "g", max_wait=20)])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pull)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert len(service.broker.holds) == 1 and not answers
        await q.publish(addr, "news", b"extra")
    assert answers == [[b"extra"]]


async def test_the_trio_face_awaits_the_same_calls(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    service, addr, q = trio_queue
    assert await q.publish_many(addr, "t", [b"a", (b"b", {"h": "v"})]) == [0, 1]
    async with q.subscribe(addr, "t", "c", credits=4) as sub:
        got = []
        async for msg in sub:
            got.append((msg.body, msg.headers))
            await msg.ack()
            if len(got) == 2:
                break
    assert got == [(b"a", {}), (b"b", {"h": "v"})]
    async with trio.open_nursery() as nursery:
        pulled: list[bytes] = []

        async def pull() -> None:
            pulled.extend(m.body for m in await q.pull(addr, "t", offset=2, max_wait=20))

        nursery.start_soon(pull)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert len(service.broker.holds) == 1
        await q.publish(addr, "t", b"c")
    assert pulled == [b"c"]
    await q.commit(addr, "t", "g", 3)
    assert (await q.offsets(addr, "t")).groups == {"g": 3}
    assert (await q.statistics(addr, "t")).topics["t"].end == 3


def test_a_pull_of_large_messages_stops_at_four_mebibytes(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    _, server = queue_server
    big = bytes(600 * 1024)
    q.publish_many(server.addr, "big", [big] * 10)
    first = q.pull(server.addr, "big", offset=0, max_messages=10, max_wait=0)
    assert 1 <= len(first) <= 7 and all(m.body == big for m in first)
    rest = q.pull(server.addr, "big", offset=len(first), max_messages=10, max_wait=0)
    assert rest[0].offset == len(first)
