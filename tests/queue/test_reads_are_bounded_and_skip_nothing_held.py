"""Reading a topic's records (real segment files, no sockets; hypothesis over where, how many
and how many bytes): whatever the bounds, a read returns the records held from where it
starts, in order, skipping none that is held (a record left out would be taken for gone and
its delivery dropped), within its count and bytes (one record at least); the loop's read
(page cache or nothing), the read in a worker thread, and a subscriber's reads a frame at a
time all agree."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.queue._sansio._records import build_record, encode_content, record_offset
from remoting.queue._segments import READ_CHUNK, SegmentLog
from remoting.queue._store import TopicStore
from remoting.queue._topic import Topic

# Sizes that put records inside a read chunk, across chunk ends, and over a whole chunk.
SIZES = (100, 3_000, READ_CHUNK + 5_000, 40, 70_000)
COUNT = 300


def _record(offset: int) -> bytes:
    size = SIZES[offset % len(SIZES)] if offset % 7 else 10
    return build_record(offset, 1_000, 0, encode_content(None, bytes(size)))


@pytest.fixture(scope="module")
def topic() -> Iterator[tuple[Topic, set[int]]]:
    """A topic of `COUNT` + 30 records of mixed sizes, with a gap from 60 where a corrupt
    segment's records were set aside at recovery, the newest 20 in memory; and the offsets
    held."""
    with tempfile.TemporaryDirectory() as directory:
        log = SegmentLog(Path(directory), segment_bytes=1_000_000)
        for offset in range(COUNT):
            log.append([_record(offset)], offset)
        log.close()
        segments = sorted(Path(directory).glob("*.log"))
        assert len(segments) > 3
        victim = max((p for p in segments if int(p.stem) <= 60), key=lambda p: int(p.stem))
        data = bytearray(victim.read_bytes())
        at = 0
        while True:  # the record 60's CRC breaks: 60 and the rest of its segment go aside
            length = int.from_bytes(data[at:at + 4], "big")
            if record_offset(bytes(data[at:at + 16])) == 60:
                data[at + 40] ^= 0xFF
                break
            at += 4 + length
        victim.write_bytes(bytes(data))
        log = SegmentLog(Path(directory), segment_bytes=1_000_000)
        assert [p.kind for p in log.recovered.problems] == ["corrupt"]
        store = TopicStore(20, log)
        held = set()
        for offset in range(store.earliest, COUNT):
            if log.read(offset, 1, until=offset + 1):
                held.add(offset)
        assert 60 in set(range(COUNT)) - held
        for offset in range(COUNT, COUNT + 30):  # the newest in memory too
            store.append([_record(offset)])
            held.add(offset)
        assert store.memory_base == COUNT + 10
        yield Topic("t", store, msg_timeout=30.0, max_attempts=0, dedup_window=60.0), held
        log.close()


def _check(records: list[bytes], start: int, count: int, max_bytes: int,
           held: set[int]) -> None:
    offsets = [record_offset(r) for r in records]
    expected_first = min((o for o in held if o >= start), default=None)
    if expected_first is None:
        assert offsets == []
        return
    assert offsets, "a read returns one record at least"
    assert offsets[0] == expected_first
    assert offsets == sorted(o for o in held if offsets[0] <= o <= offsets[-1])  # none skipped
    assert len(offsets) <= count
    assert len(offsets) == 1 or sum(map(len, records)) <= max_bytes


reads = given(start=st.integers(0, COUNT + 35), count=st.integers(1, 400),
              max_bytes=st.sampled_from([1, 5_000, 200_000, 1_000_000, 2**62]))


@reads
@settings(max_examples=300, deadline=None)
def test_a_blocking_read_returns_what_is_held_within_its_bounds(
        topic: tuple[Topic, set[int]], start: int, count: int, max_bytes: int) -> None:
    store = topic[0].store
    records = store.read(start, count, max_bytes)
    assert records is not None
    _check(records, start, count, max_bytes, topic[1])
    page_cache = store.read(start, count, max_bytes, nowait=True)
    assert page_cache is None or page_cache == records  # all or nothing, never other


@reads
@settings(max_examples=100, deadline=None)
def test_a_read_in_a_worker_thread_returns_what_is_held_within_its_bounds(
        topic: tuple[Topic, set[int]], start: int, count: int, max_bytes: int) -> None:
    store = topic[0].store

    async def read() -> list[bytes]:
        return await store.read_async(start, count, max_bytes, trio.CapacityLimiter(1))

    _check(trio.run(read), start, count, max_bytes, topic[1])


@given(first=st.integers(0, COUNT + 29), length=st.integers(1, 200),
       max_bytes=st.sampled_from([1, 5_000, 1_000_000]))
@settings(max_examples=100, deadline=None)
def test_a_subscriber_s_reads_cover_every_offset_once_and_find_every_held_one(
        topic: tuple[Topic, set[int]], first: int, length: int, max_bytes: int) -> None:
    wanted = list(range(first, min(first + length, COUNT + 30)))

    async def read_all() -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        pending = list(wanted)
        while pending:
            covered, records = await topic[0].read_some(pending, max_bytes,
                                                        trio.CapacityLimiter(1))
            assert covered >= 1 and set(records) <= set(pending[:covered])
            found.update(records)
            del pending[:covered]
        return found

    found = trio.run(read_all)
    assert set(found) == {o for o in wanted if o in topic[1]}
    assert all(record_offset(r) == o for o, r in found.items())
