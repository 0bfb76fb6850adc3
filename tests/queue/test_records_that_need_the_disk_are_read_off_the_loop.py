"""Records no longer in memory nor in the page cache (real files evicted with
``posix_fadvise``, real sockets): pulls and subscriptions read them in a worker thread and
get them whole; a held pull woken for such records is answered once they were read."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from remoting.queue import QueueService

from .trio_served import serve_trio

BODY = b"x" * 3000


def _evict(directory: Path) -> None:
    """Drop the segments' pages from the page cache.

    Each file is read to its end first: that waits out any readahead still in flight (a
    read started before, even a failed ``RWF_NOWAIT`` one, starts it), whose pages would
    otherwise come back into the cache after ``POSIX_FADV_DONTNEED`` (seen under load)."""
    for path in directory.rglob("*.log"):
        fd = os.open(path, os.O_RDONLY)
        try:
            while os.read(fd, 1 << 20):
                pass
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


async def test_pulls_and_deliveries_of_evicted_records_are_read_whole(
        nursery: trio.Nursery, tmp_path: Path) -> None:
    service = QueueService(tmp_path, memory_messages=4, fsync="never")
    addr, q = await serve_trio(nursery, service)
    bodies = [b"%04d" % i + BODY for i in range(500)]
    for first in range(0, 500, 100):
        await q.publish_many(addr, "t", bodies[first:first + 100])
    store = service.broker.topics["t"].store
    _evict(tmp_path)
    pulled = await q.pull(addr, "t", offset=10, max_messages=300, max_wait=0)
    assert [m.body for m in pulled] == bodies[10:310]
    _evict(tmp_path)
    delivered = []
    async with q.subscribe(addr, "t", "c", credits=256) as sub:
        async for msg in sub:
            delivered.append(msg.body)
            await msg.ack()
            if len(delivered) == 500:
                break
    assert delivered == bodies
    if hasattr(os, "RWF_NOWAIT"):  # elsewhere every segment read goes to a thread anyway
        assert store.disk_reads >= 2


async def test_a_held_pull_woken_for_evicted_records_is_answered_once_they_are_read(
        nursery: trio.Nursery, tmp_path: Path) -> None:
    service = QueueService(tmp_path, memory_messages=4, fsync="never")
    addr, q = await serve_trio(nursery, service)
    due = trio.current_time() + 2.0
    await q.publish(addr, "t", b"later", defer=2.0)  # offset 0, due in two seconds
    answer: list[bytes] = []
    answered = trio.Event()

    async def pull() -> None:
        answer.extend(m.body for m in await q.pull(addr, "t", offset=0, max_wait=30.0))
        answered.set()

    nursery.start_soon(pull)
    await q.publish_many(addr, "t", [BODY] * 50)  # offset 0 leaves memory
    store = service.broker.topics["t"].store
    assert store.memory_base > 0
    _evict(tmp_path)
    prefetches = service.broker.prefetches
    assert trio.current_time() < due  # evicted before the pull is woken
    with trio.fail_after(10):
        await answered.wait()  # woken when offset 0 came due: read off the loop, then sent
    assert answer[0] == b"later" and answer[1:] == [BODY] * (len(answer) - 1)
    # its wake found the records not in the page cache (the kernel may have read them in by
    # the time the prefetch ran: the failed attempt starts its readahead)
    assert service.broker.prefetches > prefetches
