"""Segment files (real files, no sockets): records read back from any offset across
segments; reopening recovers them; a torn tail is cut off, corruption is set aside and named,
the rest kept; retention deletes whole old segments; a topic's store bounds its memory."""

from __future__ import annotations

from pathlib import Path

from remoting.queue._sansio._records import build_record, decode_records, encode_content
from remoting.queue._segments import SegmentLog, fsync_paths
from remoting.queue._store import TopicStore


def records(first: int, count: int, size: int = 100) -> list[bytes]:
    return [build_record(first + i, 1_000, 0, encode_content(None, b"%08d" % (first + i)
                                                              + bytes(size)))
            for i in range(count)]


def bodies(data: list[bytes] | None) -> list[int]:
    assert data is not None  # (None only with nowait)
    return [int(r.body[:8]) for chunk in data for r in decode_records(chunk)]


def filled(directory: Path, count: int = 500) -> SegmentLog:
    log = SegmentLog(directory, segment_bytes=8192)
    for first in range(0, count, 50):
        log.append(records(first, 50), first)
    return log


def test_records_read_back_from_any_offset_across_segments(tmp_path: Path) -> None:
    log = filled(tmp_path)
    assert log.segments > 5 and (log.earliest, log.end) == (0, 500)
    assert bodies(log.read(0, 500)) == list(range(500))
    assert bodies(log.read(137, 20)) == list(range(137, 157))
    assert bodies(log.read(499, 10)) == [499] and log.read(500, 10) == []
    log.close()
    again = SegmentLog(tmp_path, segment_bytes=8192)
    assert (again.end, again.recovered.problems) == (500, [])
    assert bodies(again.read(250, 1000)) == list(range(250, 500))
    again.append(records(500, 1), 500)
    assert bodies(again.read(499, 5)) == [499, 500]


def test_a_torn_tail_is_cut_off_and_the_rest_kept(tmp_path: Path) -> None:
    filled(tmp_path, 100).close()
    newest = max(tmp_path.glob("*.log"))
    size = newest.stat().st_size
    with open(newest, "ab") as file:
        file.write(records(100, 1)[0][:40])  # a write the process did not finish
    log = SegmentLog(tmp_path, segment_bytes=8192)
    [problem] = log.recovered.problems
    assert problem.kind == "torn" and problem.path == newest and problem.position == size
    assert newest.stat().st_size == size and log.end == 100
    log.append(records(100, 1), 100)
    assert bodies(log.read(98, 5)) == [98, 99, 100]


def test_corruption_is_set_aside_named_and_the_rest_recovered(tmp_path: Path) -> None:
    filled(tmp_path, 500).close()
    segments = sorted(tmp_path.glob("*.log"))
    victim = segments[2]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    log = SegmentLog(tmp_path, segment_bytes=8192)
    [problem] = log.recovered.problems
    assert problem.kind == "corrupt" and problem.path == victim
    assert str(victim) in str(problem) and "corrupt from byte" in str(problem)
    assert problem.set_aside is not None and problem.set_aside.exists()
    assert victim.stat().st_size + problem.set_aside.stat().st_size == len(data)
    kept = bodies(log.read(0, 1000))
    lost = set(range(500)) - set(kept)
    assert kept == sorted(kept) and kept[-1] == 499 and log.end == 500
    assert 0 < len(lost) < 50  # only the corrupt segment's tail is missing
    assert bodies(log.read(min(lost), 3)) == [max(lost) + 1, max(lost) + 2, max(lost) + 3]


def test_retention_deletes_whole_old_segments_and_keeps_the_end(tmp_path: Path) -> None:
    log = filled(tmp_path, 500)
    before = log.segments
    assert log.delete_below(250) > 0 and log.segments < before
    assert 0 < log.earliest <= 250 and bodies(log.read(0, 2))[0] == log.earliest
    log.delete_below(10_000)
    assert log.segments == 1 and log.end == 500  # the newest stays: it carries the end
    log.close()
    assert SegmentLog(tmp_path, segment_bytes=8192).end == 500


def test_sync_hands_out_the_written_segments_only(tmp_path: Path) -> None:
    log = filled(tmp_path, 100)
    paths = log.to_sync()
    assert paths and all(path.exists() for path in paths)
    fsync_paths([*paths, tmp_path / "gone.log"])  # one deleted meanwhile is skipped
    assert log.to_sync() == []
    log.append(records(100, 1), 100)
    assert log.to_sync() == [max(tmp_path.glob("*.log"))]


def test_a_store_without_a_directory_holds_at_most_memory_messages(tmp_path: Path) -> None:
    store = TopicStore(10, None)
    store.append(records(0, 8))
    assert store.has_room(2, 0) and not store.has_room(3, 0)
    store.trim(5)
    assert (store.earliest, store.retained, store.has_room(7, 0)) == (5, 3, True)
    assert bodies(store.read(0, 10)) == [5, 6, 7]


def test_a_store_holds_at_most_memory_bytes_too(tmp_path: Path) -> None:
    size = len(records(0, 1)[0])
    store = TopicStore(1000, None, memory_bytes=10 * size)
    store.append(records(0, 8))
    assert store.memory_size == 8 * size
    assert store.has_room(2, 2 * size) and not store.has_room(1, 3 * size)
    store.trim(5)
    assert store.memory_size == 3 * size and store.has_room(7, 7 * size)
    cached = TopicStore(1000, SegmentLog(tmp_path, segment_bytes=1 << 20),
                        memory_bytes=10 * size)
    for first in range(0, 100, 20):
        cached.append(records(first, 20))
    assert cached.in_memory == 10 and cached.memory_size == 10 * size  # the newest ten
    assert bodies(cached.read(0, 100)) == list(range(100))


def test_a_store_with_a_directory_keeps_memory_messages_and_reads_the_rest_from_disk(
        tmp_path: Path) -> None:
    store = TopicStore(100, SegmentLog(tmp_path, segment_bytes=1 << 20))
    for first in range(0, 1000, 50):
        store.append(records(first, 50))
    assert store.in_memory <= 100 and store.has_room(10**6, 10**12)
    assert bodies(store.read(0, 1000)) == list(range(1000))
    assert bodies(store.read(880, 40)) == list(range(880, 920))
