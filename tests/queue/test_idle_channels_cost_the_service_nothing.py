"""Channels and groups are bounded, and idle ones cost the service nothing (real sockets): the
timer visits only the channel whose deadline came, housekeeping only the topics that
changed, and STATS answers the service's totals, not every channel, unless asked for one
topic or a page of topics. The service holds at most ``max_total_channels`` channels and
``max_total_groups`` groups in all (one more is refused NO_PERMISSION, saying which), and with
``channel_idle_timeout`` a channel without subscribers goes away.

Counted, not timed: calls to `ChannelQueue.expire` and `ChannelQueue.floor` (what the timer
and housekeeping did per channel), and the bytes of STATS answers. Before, a timer tick for
one delivery's deadline expired every channel of every topic, each second's housekeeping
computed every channel's floor twice, and STATS answered every channel (45 MB at 60,000)."""

from __future__ import annotations

import pytest
import trio

from codec import ResponseCode
from remoting.queue import QueueError, QueueService, TrioQueueClient
from remoting.queue._broker import Broker
from remoting.queue._requests import stats_request
from remoting.queue._sansio._channel_queue import ChannelQueue

from ..logs import capture_logs
from .counted import counting, serve_trio

IDLE = 2_000


async def _idle_channels(service: QueueService, q: TrioQueueClient, addr: str) -> None:
    """``IDLE`` channels nobody subscribes to, on ten topics (made on the loop: this test
    runs there), with a message each has not delivered."""
    for t in range(10):
        await q.publish(addr, f"idle{t}", b"x")
        topic = service.broker.topics[f"idle{t}"]
        for c in range(IDLE // 10):
            service.broker.add_channel(topic, f"c{c}")


async def test_the_timer_visits_only_the_channel_whose_deadline_came(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    service = QueueService(msg_timeout=0.2, max_channels=IDLE)
    addr, _, q = await serve_trio(nursery, service)
    await _idle_channels(service, q, addr)
    await q.publish(addr, "busy", b"not acknowledged in time")
    expired = counting(monkeypatch, ChannelQueue, "expire")
    async with q.subscribe(addr, "busy", "c", credits=1) as sub:
        first = await sub.receive()
        again = await sub.receive()  # redelivered once its deadline passed
    assert first is not None and again is not None and again.attempts == 2
    # the tick for that deadline visited that channel, once; it expired all 2,001 before
    assert expired() == 1


async def test_housekeeping_visits_only_the_topics_that_changed(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    service = QueueService(msg_timeout=30.0, max_channels=IDLE)
    addr, _, q = await serve_trio(nursery, service)
    await _idle_channels(service, q, addr)
    runs = counting(monkeypatch, Broker, "_save_offsets")  # once per housekeeping run
    with trio.fail_after(10):
        while runs() < 1:  # noqa: ASYNC110 - a bounded wait for the first run
            await trio.sleep(0.05)
    floors = counting(monkeypatch, ChannelQueue, "floor")
    with trio.fail_after(10):
        while runs() < 3:  # noqa: ASYNC110 - two whole runs with nothing changed
            await trio.sleep(0.05)
    assert floors() == 0  # it took every idle channel's floor each second: 2,000 a run


async def test_stats_answers_totals_and_pages_and_stays_small(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0, max_channels=IDLE)
    addr, client, q = await serve_trio(nursery, service)
    await _idle_channels(service, q, addr)
    summary = await client.invoke_sync(addr, stats_request(None, None, None), 10.0)
    assert summary.body is not None and len(summary.body) < 2_000  # was 322,125 bytes
    totals = await q.statistics(addr)
    assert (totals.topic_count, totals.channel_count, totals.topics) == (10, IDLE, {})
    one = await q.statistics(addr, "idle3")
    assert len(one.topics["idle3"].channels) == IDLE // 10
    assert one.topics["idle3"].channels["c7"].depth == 1
    pages = []
    after = None
    while True:
        page = await q.statistics(addr, after=after, limit=4)
        pages.append(list(page.topics))
        assert all(t.channel_count == IDLE // 10 and not t.channels
                   for t in page.topics.values())
        after = page.next_after
        if after is None:
            break
    assert sum(pages, []) == sorted(f"idle{t}" for t in range(10)) and len(pages) == 3


async def test_channels_and_groups_are_bounded_in_all(nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0, max_total_channels=3, max_total_groups=2)
    addr, _, q = await serve_trio(nursery, service)
    for topic, channel in (("a", "c1"), ("a", "c2"), ("b", "c1")):
        await q.publish(addr, topic, b"x")
        async with q.subscribe(addr, topic, channel) as sub:
            assert await sub.receive() is not None
    await q.publish(addr, "c", b"x")
    with pytest.raises(QueueError, match="has 3 channels in all, its max_total_channels") as no:
        async with q.subscribe(addr, "c", "c1"):
            pass
    assert no.value.code == ResponseCode.NO_PERMISSION
    await q.commit(addr, "a", "g1", 0)
    await q.commit(addr, "b", "g1", 0)
    with pytest.raises(QueueError, match="max_total_groups"):
        await q.commit(addr, "c", "g1", 0)
    assert service.delete_channel("a", "c1") and service.delete_group("b", "g1")
    async with q.subscribe(addr, "c", "c1") as sub:  # room again
        assert await sub.receive() is not None
    await q.commit(addr, "c", "g1", 0)
    totals = await q.statistics(addr)
    assert (totals.channel_count, totals.group_count) == (3, 2)


async def test_a_channel_without_subscribers_for_channel_idle_timeout_goes_away(
        nursery: trio.Nursery) -> None:
    service = QueueService(msg_timeout=30.0, channel_idle_timeout=0.2)
    addr, _, q = await serve_trio(nursery, service)
    await q.publish_many(addr, "t", [b"a", b"b"])
    with capture_logs() as events:
        async with q.subscribe(addr, "t", "passing", credits=1) as sub:
            msg = await sub.receive()
            assert msg is not None
            await msg.ack()
        async with q.subscribe(addr, "t", "staying") as sub:
            with trio.fail_after(10):
                while (await q.statistics(addr)).channels_expired < 1:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            detail = (await q.statistics(addr, "t")).topics["t"]
            assert set(detail.channels) == {"staying"}  # it has a subscriber: kept
    [expired] = [e for e in events if e["event"] == "queue.channel_expired"]
    assert (expired["channel"], expired["undelivered"]) == ("passing", 1)
