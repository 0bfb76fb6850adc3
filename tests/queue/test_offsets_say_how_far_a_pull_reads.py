"""OFFSETS says how far a pull reads now (``readable``): up to the first deferred message not
yet due from the offset asked about. A pull from past a deferred message is not held back by
it (only the messages after it are). Spark's streaming source plans its triggers with this."""

from __future__ import annotations

from remoting.queue import QueueService, TrioQueueClient


async def test_readable_stops_at_a_deferred_message_not_yet_due(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    _, addr, q = trio_queue
    await q.publish_many(addr, "t", [b"a", b"b"])
    await q.publish(addr, "t", b"later", defer=60.0)
    await q.publish_many(addr, "t", [b"c", b"d"])

    everything = await q.offsets(addr, "t")
    past_it = await q.offsets(addr, "t", offset=3)

    assert (everything.earliest, everything.end, everything.readable) == (0, 5, 2)
    assert (past_it.end, past_it.readable) == (5, 5)


async def test_a_pull_from_past_a_deferred_message_reads_at_once(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    _, addr, q = trio_queue
    await q.publish(addr, "t", b"later", defer=60.0)
    await q.publish_many(addr, "t", [b"c", b"d"])

    assert await q.pull(addr, "t", offset=0, max_wait=0) == []
    assert [m.body for m in await q.pull(addr, "t", offset=1, max_wait=0)] == [b"c", b"d"]


async def test_readable_is_the_end_with_nothing_deferred(
        trio_queue: tuple[QueueService, str, TrioQueueClient]) -> None:
    _, addr, q = trio_queue
    await q.publish_many(addr, "t", [b"a", b"b", b"c"])
    await q.commit(addr, "t", "g", 1)

    offsets = await q.offsets(addr, "t", offset=2)

    assert (offsets.readable, offsets.end, offsets.groups) == (3, 3, {"g": 1})
