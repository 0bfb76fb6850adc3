"""`SegmentLog`: a topic's records in append-only segment files under its data directory.

Theory of operation (called on the service's loop thread: appends are one ``write`` each, to
the page cache; a read on the loop takes only what the page cache holds (`read_spans` with
``nowait``), the rest is read in a worker thread; fsync runs in a worker thread too):
- A topic's directory holds segment files named by the first offset they hold
  (``00000000000000000042.log``), each at most about ``segment_bytes``. Records
  (`_sansio/_records.py`) are appended to the newest with one ``write`` per publish: once
  it returns, the record survives the process (the kernel has it); surviving the machine
  needs an fsync (see `QueueService`'s ``fsync`` setting).
- Each segment keeps a sparse index in memory (an offset and its byte position every
  `INDEX_EVERY` records, and at least every `READ_CHUNK` bytes); a read opens the segments it
  needs (`plan`), seeks through the index and ``pread``s forward. Only the newest segment
  may have a descriptor kept open, for appending; the service closes those of the topics
  written least recently past a bound (`close_append`), so however many topics it has, it
  does not run the process out of descriptors.
- Opening a directory is recovery: every segment is scanned (`scan`). A torn tail of the
  newest segment (a write the process did not finish) is cut off. Corruption (an impossible
  length, a CRC that does not match, a record whose offset is not the next one, a torn
  record anywhere but at the very end) keeps the segment's good prefix. Either way the bytes
  cut off are moved aside to ``<segment>.torn-<position>`` or ``.corrupt-<position>`` (never
  deleted) and reported as a `Problem` naming the file; every other segment is kept, so
  offsets may have a gap there, which reads step over. Only files named as segments are
  read (20 ASCII digits and ``.log``); other ``.log`` files are reported (``ignored``).
- ``to_sync`` returns the segments written since the last sync: a worker thread opens,
  fsyncs and closes them one at a time (`fsync_paths`: a burst of many topics written needs
  one descriptor, not one each); one deleted meanwhile needs none.
"""

from __future__ import annotations

import bisect
import errno
import os
import re
import struct
import time
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from ._sansio._records import Scan, record_offset, scan

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["INDEX_EVERY", "NO_BYTE_LIMIT", "Problem", "Recovered", "SegmentLog", "Span",
           "close_spans", "fsync_paths", "read_spans"]

# Records between two entries of a segment's sparse index at most; and an entry at least
# every `READ_CHUNK` bytes, so a read never walks through more than a chunk to its record
# (large records: each has its entry).
INDEX_EVERY: Final = 64
SUFFIX: Final = ".log"
READ_CHUNK: Final = 256 * 1024  # bytes read at once from a segment
_LENGTH: Final = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Problem:
    """What recovery found wrong in one segment file."""

    path: Path
    kind: Literal["torn", "corrupt"]
    position: int  # where the good bytes end
    reason: str
    set_aside: Path | None  # where the bytes after ``position`` were moved
    kept: str | None = None  # why they could not be (they stay in the file, unread)

    def __str__(self) -> str:
        if self.kept is not None:
            return (f"{self.path}: {self.kind} from byte {self.position} ({self.reason}); the "
                    f"bytes after it could not be set aside ({self.kept}) and stay in the file, "
                    "unread: the records before them are served, new ones go to a new "
                    "segment, and the next start tries again")
        if self.kind == "torn":
            return (f"{self.path}: an unfinished write at byte {self.position} was cut off "
                    f"({self.reason}) and moved to {self.set_aside}")
        return (f"{self.path}: corrupt from byte {self.position} ({self.reason}); the records "
                f"before it are kept, the rest was moved to {self.set_aside}")


@dataclass(slots=True)
class Recovered:
    """What opening a directory found besides the records."""

    problems: list[Problem] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)  # ``*.log`` files not named as segments
    keys: list[tuple[str, int, int, int]] = field(default_factory=list)  # key, first, n, ms
    deferred: list[tuple[int, int]] = field(default_factory=list)  # offset, deliver_at_ms


NO_BYTE_LIMIT: Final = 2**62
_NOWAIT: Final = getattr(os, "RWF_NOWAIT", None)  # Linux 4.14+: fail a read the page cache
# cannot answer at once, instead of waiting for the disk


@dataclass(slots=True)
class Span:
    """A segment's bytes to read: from ``position`` (a record's start) to ``end``."""

    fd: int
    position: int
    end: int
    owned: bool  # ``fd`` is a duplicate, closed once read


def fsync_paths(paths: list[Path]) -> None:
    """fsync the files ``paths``, one at a time (in a worker thread); one gone meanwhile
    (deleted by retention) is skipped.

    Raises:
        OSError: the first that failed (the others were fsynced).
    """
    failed: OSError | None = None
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed = failed or exc
            continue
        try:
            os.fsync(fd)
        except OSError as exc:
            failed = failed or exc
        finally:
            os.close(fd)
    if failed is not None:
        raise failed


def close_spans(spans: list[Span]) -> None:
    """Close the duplicated descriptors of ``spans``."""
    for span in spans:
        if span.owned:
            os.close(span.fd)


def _pread(fd: int, size: int, position: int, nowait: bool) -> bytes | None:
    """Read ``size`` bytes at ``position``; with ``nowait``, None unless the page cache
    holds all of them."""
    if not nowait:
        return os.pread(fd, size, position)
    if _NOWAIT is None:
        return None  # no way to ask: assume the disk
    buffer = bytearray(size)
    try:
        got = os.preadv(fd, [buffer], position, _NOWAIT)
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system without it
            return None
        raise
    return bytes(buffer) if got == size else None


def read_spans(spans: list[Span], offset: int, until: int, max_count: int, max_bytes: int,
               nowait: bool) -> list[bytes] | None:
    """Return up to ``max_count`` records of ``spans`` whose offset is from ``offset`` to
    ``until`` (excluded), adding none that would pass ``max_bytes`` in all (but the first);
    close the spans' duplicated descriptors. With ``nowait``, return None as soon as a read
    would wait for the disk (its bytes are not all in the page cache). Called on the loop
    (``nowait``: a copy from memory) or, for the rest, in a worker thread (on duplicated
    descriptors).

    Raises:
        OSError: a read failed.
    """
    records: list[bytes] = []
    size = 0
    try:
        for span in spans:
            fd, position, end_of_span = span.fd, span.position, span.end
            while position < end_of_span and len(records) < max_count:
                data = _pread(fd, min(READ_CHUNK, end_of_span - position), position, nowait)
                if data is None:
                    return None
                at = 0
                while at + 4 <= len(data) and len(records) < max_count:
                    end = at + 4 + _LENGTH.unpack_from(data, at)[0]
                    if end > len(data):
                        break
                    record = record_offset(data, at)
                    if record >= until or (records and size + end - at > max_bytes):
                        return records
                    if record >= offset:
                        records.append(data[at:end])
                        size += end - at
                    at = end
                if at == 0:  # one record larger than a chunk
                    (length,) = _LENGTH.unpack_from(data, 0)
                    record = record_offset(data)
                    if record >= until or (records and size + 4 + length > max_bytes):
                        return records
                    if record < offset:  # before the one wanted: skip it unread
                        position += 4 + length
                        continue
                    whole = _pread(fd, 4 + length, position, nowait)
                    if whole is None:
                        return None
                    records.append(whole)
                    size += len(whole)
                    at = len(whole)
                position += at
        return records
    finally:
        close_spans(spans)


_SEGMENT_NAME: Final = re.compile(r"[0-9]{20}\.log")  # its first offset, 20 ASCII digits


def _check_offsets(scanned: Scan, base: int, last: int) -> None:
    """Mark ``scanned`` corrupt from its first record out of place: a segment's records are
    ``base``, ``base + 1``... (it is named by its first), all after the previous segment's
    ``last`` (CRCs cannot tell a file copied from elsewhere, or renamed)."""
    expected = base
    for k, offset in enumerate(scanned.offsets):
        if offset != expected or offset <= last:
            scanned.problem = "corrupt"
            scanned.reason = (f"offset {offset} where {expected} was expected" if offset
                              != expected else f"offset {offset} repeats an earlier segment's")
            scanned.cut(k)
            return
        expected += 1


def _drop_unfinished(scanned: Scan) -> None:
    """Cut off a publish whose last record is missing at the end of what was read whole: a
    write the process did not finish (killed during it, or a write that failed and could
    not be undone), so never acknowledged: all of its records go, not the first few. After
    corruption the records are kept instead (damage later than the write: they were
    acknowledged), and only its key is not remembered (`scan` lists whole batches' keys)."""
    if scanned.unfinished is None or scanned.problem == "corrupt":
        return
    index = scanned.unfinished
    written = len(scanned.offsets) - index
    announced = f" of {scanned.unfinished_count}" if scanned.unfinished_count else ""
    reason = f"a publish cut short: {written}{announced} of its records were written whole"
    scanned.reason = reason if scanned.problem is None else f"{scanned.reason}; {reason}"
    scanned.problem = "torn"
    scanned.cut(index)


class _Segment:
    __slots__ = ("base", "count", "first", "index_offsets", "index_positions", "kept_aside",
                 "last", "modified", "path", "size")

    def __init__(self, path: Path, base: int) -> None:
        self.path = path
        self.base = base
        self.size = 0
        self.count = 0
        self.first = -1  # offsets of its first and last records (-1: none yet)
        self.last = -1
        self.index_offsets = array("q")
        self.index_positions = array("q")
        self.modified = time.time()  # when last written (wall clock): retention's measure
        # bad bytes after ``size`` that recovery could not move aside (a full disk): where
        # the whole file goes instead of being deleted
        self.kept_aside: Path | None = None

    def note(self, offset: int, position: int) -> None:
        """Record that the record ``offset`` starts at ``position``."""
        positions = self.index_positions
        if self.count % INDEX_EVERY == 0 or position - positions[-1] >= READ_CHUNK:
            self.index_offsets.append(offset)
            positions.append(position)
        if self.first < 0:
            self.first = offset
        self.last = offset
        self.count += 1

    def position_of(self, offset: int) -> int:
        """Return a byte position at or before the record ``offset`` (0 if before all)."""
        i = bisect.bisect_right(self.index_offsets, offset) - 1
        return self.index_positions[i] if i >= 0 else 0


class SegmentLog:
    """The segment files of one topic (see the module docstring)."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        """Open (and recover) ``directory``; `recovered` says what was found.

        Raises:
            OSError: the directory cannot be made or read.
        """
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._segments: list[_Segment] = []
        self._bases: list[int] = []
        self._write_fd: int | None = None
        self._sealed = False  # the newest segment takes no more (a failed write stayed)
        self._dirty: set[_Segment] = set()
        directory.mkdir(parents=True, exist_ok=True)
        self.recovered = self._recover()

    @property
    def end(self) -> int:
        """The offset the next record gets."""
        for segment in reversed(self._segments):
            if segment.last >= 0:
                return segment.last + 1
        return self._segments[-1].base if self._segments else 0

    @property
    def earliest(self) -> int:
        """The first offset on disk (``end`` when there is none)."""
        for segment in self._segments:
            if segment.first >= 0:
                return segment.first
        return self.end

    @property
    def segments(self) -> int:
        """How many segment files there are."""
        return len(self._segments)

    @property
    def size_bytes(self) -> int:
        """The bytes of every segment."""
        return sum(s.size for s in self._segments)

    # ------------------------------------------------------------------ recovery

    def _recover(self) -> Recovered:
        found = Recovered()
        paths = []
        for path in self.directory.iterdir():
            if _SEGMENT_NAME.fullmatch(path.name):
                paths.append(path)
            elif path.name.endswith(SUFFIX):  # not a name this service gives a segment
                found.ignored.append(path)
        paths.sort(key=lambda p: int(p.name[:-len(SUFFIX)]))
        last = -1  # the previous segment's last offset
        for i, path in enumerate(paths):
            base = int(path.name[:-len(SUFFIX)])
            data = path.read_bytes()
            scanned = scan(data)
            _drop_unfinished(scanned)
            _check_offsets(scanned, base, last)
            newest = i == len(paths) - 1
            segment = _Segment(path, base)
            if scanned.problem is not None:
                problem = self._repair(path, data, scanned.valid_bytes,
                                       "torn" if scanned.problem == "torn" and newest
                                       else "corrupt", scanned.reason)
                found.problems.append(problem)
                if problem.kept is not None:  # its bad bytes stay after its good records
                    segment.kept_aside = path.with_name(
                        f"{path.name}.{problem.kind}-{problem.position}")
                    self._sealed = newest  # appends go to a new segment
            for offset, position in zip(scanned.offsets, scanned.positions, strict=True):
                segment.note(offset, position)
            segment.size = scanned.valid_bytes
            try:
                segment.modified = path.stat().st_mtime
            except FileNotFoundError:  # moved aside whole: nothing good in it
                segment.modified = time.time()
            if segment.count == 0 and not newest and segment.kept_aside is None:
                path.unlink(missing_ok=True)
                continue
            self._segments.append(segment)
            self._bases.append(segment.base)
            found.keys += scanned.keys
            found.deferred += scanned.deferred
            if segment.last >= 0:
                last = segment.last
        return found

    def _repair(self, path: Path, data: bytes, valid: int, kind: Literal["torn", "corrupt"],
                reason: str) -> Problem:
        """Move the bytes after ``valid`` aside to ``<segment>.<kind>-<valid>``.

        The bytes cut off are never deleted: a torn tail is most likely a write the process
        did not finish, but a corrupt length at the end looks the same. With no room to copy
        them (a full disk), a file with no good byte is renamed instead (a rename needs no
        room), and one with good records keeps them in place: the service serves its good
        records, appends to a new segment, and tries again at the next start (`Problem`
        says so). A full disk never stops the service from serving what it holds.
        """
        aside = path.with_name(f"{path.name}.{kind}-{valid}")
        try:
            if valid == 0:
                os.replace(path, aside)
            else:
                aside.write_bytes(data[valid:])
                with open(path, "r+b") as file:
                    file.truncate(valid)
        except OSError as exc:
            aside.unlink(missing_ok=True)  # a copy cut short is not a copy
            return Problem(path, kind, valid, reason, None, kept=f"{exc.strerror or exc}")
        return Problem(path, kind, valid, reason, aside)

    # ------------------------------------------------------------------ writing

    def append(self, records: list[bytes], first: int) -> None:
        """Append ``records`` (offsets ``first``, ``first + 1``...) with one write.

        Raises:
            OSError: the write failed (a full disk: ENOSPC; a file size limit: EFBIG...).
                Nothing of it is kept: the bytes written are cut off again, or, if even that
                fails, the segment takes no more and the next append starts a new one (what
                follows its good records is then set aside at the next start).
        """
        data = b"".join(records)
        segment = self._segments[-1] if self._segments else None
        if (segment is None or self._sealed
                or (segment.size and segment.size + len(data) > self.segment_bytes)):
            segment = self._roll(first)
        fd = self._write_fd
        if fd is None:
            fd = self._write_fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                          0o644)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            self._undo(fd, segment)
            raise
        position = segment.size
        for i, record in enumerate(records):
            segment.note(first + i, position)
            position += len(record)
        segment.size = position
        segment.modified = time.time()
        self._dirty.add(segment)

    def _undo(self, fd: int, segment: _Segment) -> None:
        """Cut a failed append's bytes off ``segment`` (its good records end at ``size``):
        the next append's records must start where the index says they do."""
        try:
            os.ftruncate(fd, segment.size)
        except OSError:
            self._sealed = True

    def _roll(self, first: int) -> _Segment:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None
        newest = self._segments[-1] if self._segments else None
        if newest is not None and newest.count == 0 and newest.base == first:
            # sealed with no record (its only write failed): its name is the new one's
            self._segments.pop()
            self._bases.pop()
            self._dirty.discard(newest)
            self._remove(newest)
        segment = _Segment(self.directory / f"{first:020d}{SUFFIX}", first)
        self._write_fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._segments.append(segment)
        self._bases.append(first)
        self._sealed = False
        return segment

    def to_sync(self) -> list[Path]:
        """Return the segments written since the last call, for a worker thread to fsync
        (`fsync_paths`)."""
        paths = [segment.path for segment in self._dirty]
        self._dirty.clear()
        return paths

    def close_append(self) -> None:
        """Close the append descriptor (the next append opens it again). What was written
        stays in the page cache; `fsync_paths` opens the files it fsyncs by path."""
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    # ------------------------------------------------------------------ reading

    def plan(self, offset: int, max_count: int) -> list[Span]:
        """Return the spans to read for up to ``max_count`` records from ``offset`` on (the
        segments holding them, from a position at or before ``offset``'s record), each with
        a descriptor opened for it (`read_spans` closes them): a worker thread may read them,
        and nothing the loop does meanwhile (deleting the segment) can pull them away. A
        segment holds no descriptor between reads, so a topic costs none while idle.

        Raises:
            OSError: a segment could not be opened (none is left open).
        """
        spans: list[Span] = []
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        segments = self._segments
        needed = max_count
        try:
            while i < len(segments) and needed > 0:
                segment = segments[i]
                i += 1
                if segment.last < offset:  # before it, or empty
                    continue
                fd = os.open(segment.path, os.O_RDONLY)
                spans.append(Span(fd, segment.position_of(offset), segment.size, True))
                needed -= segment.last - max(offset, segment.first) + 1
        except OSError:
            close_spans(spans)
            raise
        return spans

    def read(self, offset: int, max_count: int, max_bytes: int = NO_BYTE_LIMIT,
             nowait: bool = False, until: int = NO_BYTE_LIMIT) -> list[bytes] | None:
        """Return up to ``max_count`` records from ``offset`` on (stepping over a gap),
        below ``until``, at most ``max_bytes`` of them (one record at least); with
        ``nowait``, None instead if that needs the disk (see `read_spans`)."""
        return read_spans(self.plan(offset, max_count), offset, until, max_count, max_bytes,
                          nowait)

    # ------------------------------------------------------------------ retention

    def delete_below(self, floor: int) -> int:
        """Delete the segments (but the newest) whose records are all below ``floor``;
        return how many."""
        gone = 0
        while len(self._segments) > 1 and self._segments[0].last < floor:
            self._delete_oldest()
            gone += 1
        return gone

    def oldest_deletable_written(self) -> float | None:
        """When the oldest segment retention may delete was last written (wall clock; None:
        there is none, the newest is never deleted)."""
        return self._segments[0].modified if len(self._segments) > 1 else None

    def delete_expired(self, written_before: float | None, max_bytes: int | None) -> int:
        """Delete the oldest segments (never the newest) last written before
        ``written_before`` (wall clock), and those that make the log larger than
        ``max_bytes``, whoever still needs their records (RocketMQ's ``fileReservedTime``
        and disk bounds); return how many."""
        gone = 0
        size = self.size_bytes
        segments = self._segments
        while len(segments) > 1:
            oldest = segments[0]
            if not ((written_before is not None and oldest.modified < written_before)
                    or (max_bytes is not None and size > max_bytes)):
                break
            size -= oldest.size
            self._delete_oldest()
            gone += 1
        return gone

    def _delete_oldest(self) -> None:
        segment = self._segments.pop(0)
        self._bases.pop(0)
        self._dirty.discard(segment)
        self._remove(segment)

    @staticmethod
    def _remove(segment: _Segment) -> None:
        """Delete ``segment``'s file, or move it aside whole if it keeps bad bytes."""
        if segment.kept_aside is not None:
            os.replace(segment.path, segment.kept_aside)
        else:
            segment.path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the append descriptor (the log is not used after this)."""
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None
        self._segments.clear()
        self._bases.clear()
