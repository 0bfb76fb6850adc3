"""Retention (real files, real sockets): without it, a topic whose channel stopped consuming
or whose group stopped committing keeps every segment, and one read only by offsets or by
groups that never commit keeps everything; ``retention_bytes`` and ``retention`` bound its
files whoever lags, the channels that lagged move on to the earliest message held (counted
as expired), and pulls read from there."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from remoting.queue import QueueService, TopicStatistics, TrioQueueClient

from .trio_served import serve_trio

BODY = b"x" * 1000
SEGMENT = 8192


async def _until(service: QueueService, done: object) -> TopicStatistics:
    """Wait (bounded: the service's housekeeping runs every second) until ``done(stats)``."""
    with trio.fail_after(10):
        while True:
            stats = service.statistics("t").topics["t"]
            if done(stats):  # type: ignore[operator]
                return stats
            await trio.sleep(0.05)


async def _lagging(addr: str, q: TrioQueueClient) -> None:
    """A channel that took one message and stopped; a group that committed once."""
    async with q.subscribe(addr, "t", "idle", credits=1) as sub:
        msg = await sub.receive()
        assert msg is not None and msg.offset == 0
        await msg.ack()
    await q.commit(addr, "t", "stopped", 1)


async def test_without_retention_a_lagging_reader_keeps_every_segment(
        nursery: trio.Nursery, tmp_path: Path) -> None:
    service = QueueService(tmp_path, segment_bytes=SEGMENT)
    addr, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", BODY)
    await _lagging(addr, q)
    for _ in range(10):
        await q.publish_many(addr, "t", [BODY] * 20)
    files = {p.name for p in (tmp_path / "topics" / "t").glob("*.log")}
    broker = service.broker
    rounds = broker._sync_started
    with trio.fail_after(10):  # a housekeeping pass (and its fsync) went by
        while broker._sync_started <= rounds or broker._sync_round:  # noqa: ASYNC110
            await trio.sleep(0.01)
    # only the first segment (offset 0, finished by all) may go; the lagging keep the rest
    kept = {p.name for p in (tmp_path / "topics" / "t").glob("*.log")}
    assert kept == files - {f"{0:020d}.log"} and len(kept) > 5
    assert service.statistics("t").topics["t"].earliest == 1


async def test_retention_bytes_bound_the_files_and_lagging_channels_move_on(
        nursery: trio.Nursery, tmp_path: Path) -> None:
    service = QueueService(tmp_path, segment_bytes=SEGMENT, retention_bytes=4 * SEGMENT)
    addr, q = await serve_trio(nursery, service)
    await q.publish(addr, "t", BODY)
    await _lagging(addr, q)
    for _ in range(10):
        await q.publish_many(addr, "t", [BODY] * 20)
    stats = await _until(service, lambda s: s.earliest > 0)
    assert stats.disk_bytes <= 5 * SEGMENT  # the bound, and the newest segment being written
    assert stats.channels["idle"].expired == stats.earliest - 1
    assert stats.groups["stopped"].offset == 1  # as committed: a pull reads from the earliest
    pulled = await q.pull(addr, "t", "stopped", max_messages=1, max_wait=0)
    assert [m.offset for m in pulled] == [stats.earliest]
    async with q.subscribe(addr, "t", "idle", credits=1) as sub:
        msg = await sub.receive()
        assert msg is not None and msg.offset == stats.earliest
        await msg.ack()
    on_disk = sum(p.stat().st_size for p in (tmp_path / "topics" / "t").glob("*.log"))
    assert on_disk == stats.disk_bytes


async def test_retention_time_deletes_segments_last_written_before_it(
        nursery: trio.Nursery, tmp_path: Path) -> None:
    service = QueueService(tmp_path, segment_bytes=SEGMENT, retention=0.5)
    addr, q = await serve_trio(nursery, service)
    for _ in range(5):
        await q.publish_many(addr, "t", [BODY] * 20)  # a topic read by offsets only
    end = service.statistics("t").topics["t"].end
    stats = await _until(service, lambda s: s.earliest > 0)
    assert stats.end == end and stats.earliest < end  # the newest segment is kept
    assert len(list((tmp_path / "topics" / "t").glob("*.log"))) == 1


def test_retention_needs_a_data_directory() -> None:
    with pytest.raises(ValueError, match="give a data_dir"):
        QueueService(retention=60.0)
    with pytest.raises(ValueError, match="retention must be a number of seconds > 0"):
        QueueService("unused", retention=0)
