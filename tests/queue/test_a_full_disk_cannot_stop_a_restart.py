"""A service restarting on a full disk after a crash (a real ``remoting queue`` whose file
size limit is 0, so every write fails with a real EFBIG, as a full disk's ENOSPC): the torn
tail of its newest segment and a corrupt segment's bad bytes cannot be moved aside, so they
stay where they are, unread, and are reported; the service starts and serves every good
record, refuses publishes clearly while its disk has no room, and once it has room again the
next start sets the bytes aside as usual. Nothing is deleted, nothing acknowledged is lost.
(Moving them aside was a copy that the full disk refused, and the service could not start.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codec import ResponseCode
from remoting.queue import BlockingQueueClient, QueueError
from remoting.queue._sansio._records import build_record, encode_content

from .service_process import QueueProcess

pytestmark = pytest.mark.default_io


def _records(offsets: range) -> bytes:
    return b"".join(build_record(o, 1_000, 0, encode_content(None, b"%d" % o)) for o in offsets)


def _damaged(data_dir: Path) -> tuple[Path, Path, bytes, bytes]:
    """Topic ``t``: 100 records and a torn record after them (a kill during a write); topic
    ``u``: a segment corrupt after its 50th record, then a good one."""
    t = data_dir / "topics" / "t"
    u = data_dir / "topics" / "u"
    t.mkdir(parents=True)
    u.mkdir(parents=True)
    torn = _records(range(100, 101))[:-5]
    (t / f"{0:020d}.log").write_bytes(_records(range(100)) + torn)
    corrupt = bytearray(_records(range(50, 60)))
    corrupt[20] ^= 0xFF  # in the CRC-covered part of record 50
    (u / f"{0:020d}.log").write_bytes(_records(range(50)) + bytes(corrupt))
    (u / f"{60:020d}.log").write_bytes(_records(range(60, 70)))
    return t / f"{0:020d}.log", u / f"{0:020d}.log", torn, bytes(corrupt)


def _offsets(q: BlockingQueueClient, addr: str, topic: str) -> list[int]:
    return [m.offset for m in q.pull(addr, topic, offset=0, max_messages=4096, max_wait=0)]


def test_a_full_disk_keeps_bad_bytes_in_place_and_the_service_serves(
        tmp_path: Path, q: BlockingQueueClient) -> None:
    t_segment, u_segment, torn, corrupt = _damaged(tmp_path)
    full = QueueProcess("--data-dir", str(tmp_path), file_size_limit=0)
    try:
        assert _offsets(q, full.addr, "t") == list(range(100))
        assert _offsets(q, full.addr, "u") == [*range(50), *range(60, 70)]
        problems = q.statistics(full.addr).problems
        assert sum("could not be set aside" in p for p in problems) == 2
        # the topics' incarnation ids are kept in memory meanwhile, and saved once it can
        assert sum("save_incarnation of topic" in p for p in problems) == 2
        with pytest.raises(QueueError) as refused:
            q.publish(full.addr, "t", b"no room")
        assert refused.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
    finally:
        stderr = full.stop()
    assert "could not be set aside (File too large)" in stderr
    assert t_segment.read_bytes().endswith(torn)  # still there: never deleted
    assert u_segment.read_bytes().endswith(corrupt)
    assert not list(tmp_path.glob("topics/*/*.torn-*")) + list(
        tmp_path.glob("topics/*/*.corrupt-*"))  # no empty copy left behind

    again = QueueProcess("--data-dir", str(tmp_path))  # room again
    try:
        assert _offsets(q, again.addr, "t") == list(range(100))
        assert q.publish(again.addr, "t", b"room") == 100
        assert _offsets(q, again.addr, "u") == [*range(50), *range(60, 70)]
    finally:
        again.stop()
    # no longer the newest segment of its topic (the refused publish began one): corrupt
    [t_aside] = [*t_segment.parent.glob("*.torn-*"), *t_segment.parent.glob("*.corrupt-*")]
    assert t_aside.read_bytes() == torn
    [u_aside] = u_segment.parent.glob("*.corrupt-*")
    assert u_aside.read_bytes() == corrupt
