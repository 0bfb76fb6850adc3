"""Credits bound a subscriber's unacknowledged deliveries (NSQ's RDY, over real sockets): a
consumer that does not acknowledge receives exactly ``credits`` messages and no more; each
acknowledgement lets one more come; the acknowledgements travel grouped."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from remoting import RemotingServer
from remoting.queue import BlockingQueueClient, QueueService, TrioQueueClient


def test_a_consumer_that_does_not_ack_receives_exactly_its_credits(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    service, server = queue_server
    q.publish_many(server.addr, "jobs", [b"%d" % i for i in range(100)])
    with q.subscribe(server.addr, "jobs", "workers", credits=7) as sub:
        held = [sub.receive(5) for _ in range(7)]
        with pytest.raises(TimeoutError):
            sub.receive(0.3)  # an eighth never comes while none is acknowledged
        channel = service.statistics("jobs").topics["jobs"].channels["workers"]
        assert (channel.in_flight, channel.delivered) == (7, 7)
        for msg in held[:3]:
            assert msg is not None
            msg.ack()
        sub.flush()
        more = [sub.receive(5) for _ in range(3)]
        with pytest.raises(TimeoutError):
            sub.receive(0.3)
    assert [m.offset for m in held + more if m is not None] == list(range(10))
    assert service.statistics("jobs").topics["jobs"].channels["workers"].delivered == 10


async def test_credits_bound_deliveries_on_the_trio_face_too(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    service, addr, q = trio_queue
    await q.publish_many(addr, "jobs", [b"x"] * 50)
    async with q.subscribe(addr, "jobs", "w", credits=5) as sub:
        for _ in range(5):
            assert await sub.receive() is not None
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert not sub._ready and not sub._stream._items  # nothing beyond the credits
        assert len(service.broker.topics["jobs"].channels["w"].queue.in_flight) == 5


async def test_acknowledgements_travel_in_groups(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    service, addr, q = trio_queue
    await q.publish_many(addr, "t", [b"x"] * 400)
    sent_before = q.client.endpoint.counters.sent.get(32_202, 0)
    async with q.subscribe(addr, "t", "c", credits=64, ack_window=10.0) as sub:
        async for msg in sub:
            await msg.ack()
            if sub.acked == 400:
                break
    ack_requests = q.client.endpoint.counters.sent.get(32_202, 0) - sent_before
    assert ack_requests <= 400 // 32 + 2  # one ACK per half window, plus the last ones
    assert service.broker.topics["t"].channels["c"].queue.finished == 400


async def test_the_ack_window_sends_a_lone_acknowledgement_soon(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    service, addr, q = trio_queue
    await q.publish(addr, "t", b"only")
    async with q.subscribe(addr, "t", "c", credits=64, ack_window=0.05) as sub:
        msg = await sub.receive()
        assert msg is not None
        await msg.ack()
        with trio.move_on_after(0.5):  # waiting for the next one sends the due group
            await sub.receive()
        assert service.broker.topics["t"].channels["c"].queue.finished == 1


def test_acknowledging_twice_or_after_closing_is_refused(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    from remoting.queue import QueueError

    _, server = queue_server
    q.publish_many(server.addr, "t", [b"a", b"b"])
    with q.subscribe(server.addr, "t", "c") as sub:
        first = sub.receive(5)
        second = sub.receive(5)
        assert first is not None and second is not None
        first.ack()
        with pytest.raises(QueueError, match="finished or requeued already") as caught:
            first.ack()
        assert caught.value.code is None
    with pytest.raises(QueueError, match="the subscription is closed"):
        second.ack()
    # the one not acknowledged went back to the channel
    with q.subscribe(server.addr, "t", "c") as again:
        back = again.receive(5)
    assert back is not None and (back.offset, back.attempts) == (1, 2)


def test_deliveries_acknowledged_from_worker_threads_all_count(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    from concurrent.futures import ThreadPoolExecutor

    service, server = queue_server
    q.publish_many(server.addr, "jobs", [b"%d" % i for i in range(2000)])
    with ThreadPoolExecutor(8) as pool, q.subscribe(server.addr, "jobs", "w", credits=64) as sub:
        for msg in sub:
            pool.submit(msg.ack)
            if sub.received == 2000 and not sub._ready:
                break
        pool.shutdown(wait=True)
    queue = service.broker.topics["jobs"].channels["w"].queue
    assert (queue.finished, len(queue.in_flight), sub.acked, sub.refused) == (2000, 0, 2000, 0)


def test_an_infinite_delay_or_wait_is_capped_not_an_error(
        queue_server: tuple[QueueService, RemotingServer], q: BlockingQueueClient) -> None:
    _, server = queue_server
    q.publish(server.addr, "t", b"far", defer=float("inf"))
    assert q.pull(server.addr, "t", offset=0, max_wait=0) == []  # due in ~24 days
