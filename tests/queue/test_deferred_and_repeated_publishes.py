"""Publish options over real sockets: a deferred message (NSQ's DPUB) is not delivered before
its time and holds back no other subscriber's message; a pull reads in order, so it waits for
it; a batch repeated with its idempotence key appends nothing and gets the first offsets."""

from __future__ import annotations

from contextlib import AsyncExitStack

import trio
import trio.testing

from remoting.queue import QueueService, TrioQueueClient


async def test_a_deferred_message_waits_and_lets_the_others_pass(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    _, addr, q = trio_queue
    await q.create_topic(addr, "t")
    published = trio.current_time()
    assert await q.publish(addr, "t", b"later", defer=0.4) == 0
    assert await q.publish(addr, "t", b"now") == 1
    async with q.subscribe(addr, "t", "c") as sub:
        first = await sub.receive()
        second = await sub.receive()
        assert first is not None and second is not None
        waited = trio.current_time() - published
        await first.ack()
        await second.ack()
    assert (first.body, second.body) == (b"now", b"later")
    assert second.attempts == 1
    assert waited >= 0.4  # wall-clock: a lower bound (not delivered before it was due)


async def test_a_pull_waits_for_a_deferred_message_before_reading_past_it(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    _, addr, q = trio_queue
    started = trio.current_time()  # before the publish: its deferral is timed from after
    await q.publish(addr, "t", b"later", defer=0.3)
    await q.publish(addr, "t", b"now")
    assert await q.pull(addr, "t", offset=0, max_wait=0) == []
    # answered when the message comes due, not at its max_wait (a minute): the bound only
    # tells the two apart
    with trio.fail_after(30):
        pulled = await q.pull(addr, "t", offset=0, max_wait=60)
    assert [m.body for m in pulled] == [b"later", b"now"]
    assert trio.current_time() - started >= 0.3  # wall-clock: a lower bound (held until due)


async def test_a_batch_repeated_with_its_key_appends_nothing(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    service, addr, q = trio_queue
    first = await q.publish_many(addr, "t", [b"a", b"b", b"c"], key="query-1/batch-7/part-0")
    await q.publish(addr, "t", b"between")
    again = await q.publish_many(addr, "t", [b"a", b"b", b"c"], key="query-1/batch-7/part-0")
    other = await q.publish_many(addr, "t", [b"d"], key="query-1/batch-8/part-0")
    assert first == again == [0, 1, 2] and other == [4]
    stats = (await q.statistics(addr, "t")).topics["t"]
    assert (stats.end, stats.duplicates, stats.published) == (5, 1, 5)


async def test_channels_keep_nothing_per_deferred_message_and_deliver_each_once(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    """Every channel copied every deferred message it passed into a heap and a dict of its
    own: 550,000 deferred messages and 200 channels grew the service by 336 MB (17x its
    memory budget). A channel now passes a deferred batch keeping nothing of it, and
    delivers it, once, when the topic releases it."""
    service, addr, q = trio_queue
    count, channels = 2_000, 8
    await q.create_topic(addr, "t")
    async with AsyncExitStack() as stack:
        subs = [await stack.enter_async_context(q.subscribe(addr, "t", f"c{i}", credits=count))
                for i in range(channels)]
        await q.publish_many(addr, "t", [b"d%d" % i for i in range(count)], defer=0.5)
        await q.publish(addr, "t", b"now")
        for sub in subs:
            with trio.fail_after(30):
                first = await sub.receive()
            assert first is not None and first.body == b"now"
            await first.ack()
        topic = service.broker.topics["t"]
        for channel in topic.channels.values():  # passed, and nothing kept per message
            assert channel.queue.cursor == count + 1
            assert not channel.queue._later and not channel.queue._attempts
        if topic.deferred:  # (unless it came due meanwhile, on a slow machine)
            stats = (await q.statistics(addr, "t")).topics["t"]
            assert {c.deferred for c in stats.channels.values()} == {count}
        for sub in subs:
            got: list[int] = []
            with trio.fail_after(60):
                while len(got) < count:
                    message = await sub.receive()
                    assert message is not None
                    got.append(message.offset)
                    await message.ack()
            assert sorted(got) == list(range(count))  # each once
