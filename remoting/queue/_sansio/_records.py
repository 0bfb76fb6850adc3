"""The queue service's message formats, as bytes: what publishers send, what the service
stores in segment files and delivers. Pure functions over bytes, no I/O.

A message's *content* is its headers and body::

    u16 header_count, then per header: u16 key_length, key, u32 value_length, value (UTF-8)
    body: the rest

A publisher sends *entries*, each ``u32 length`` + content (one frame carries many). The
service stores and delivers *records*, each one message with its place in the log::

    u32 length        of everything after this field
    u32 crc32         of everything after this field
    i64 offset        the message's place in its topic's log
    i64 timestamp_ms  when the service appended it (wall clock, milliseconds)
    i64 deliver_at_ms not before this time (0: at once), from a publish's ``defer``
    u16 flags         bit 0: an idempotence key follows; bit 1: more records of this
                      publish follow (every record of a publish but its last)
    [u16 key_length, key, u32 batch_count]   the publish's key, on the first record of its batch
    content

All integers are big-endian. A delivery or a pull answer is records back to back. `scan`
walks a segment file's bytes for recovery: it stops at a torn tail (a record cut short at the
end: a write the process did not finish) or at corruption (a length that cannot be, or a
CRC that does not match), and says which. A publish is one write of all its records; a
process killed during that write leaves some of them whole and the next one torn, or whole
records up to one that says more follow: `scan` says where such an unfinished publish starts
(``unfinished``), so recovery drops it whole (it was never acknowledged), and lists a key
only once every record of its batch was found (``keys``), so a key is never remembered for
records that are not there. Bit 1 adds no byte: a reader that does not know it ignores it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "FIXED_BYTES",
    "FLAGS_AT",
    "FLAG_KEY",
    "OFFSET_AT",
    "TIMESTAMP_AT",
    "MAX_HEADERS",
    "MAX_KEY_BYTES",
    "MAX_PUBLISH_HEADERS",
    "Record",
    "RecordError",
    "Scan",
    "TooManyEntriesError",
    "build_record",
    "decode_records",
    "encode_content",
    "pack_entries",
    "read_headers",
    "record_fields",
    "record_offset",
    "record_starts",
    "scan",
    "split_entries",
]

_HEAD: Final = struct.Struct(">IIqqqH")  # length, crc, offset, timestamp, deliver_at, flags
_LENGTH: Final = struct.Struct(">I")
_U16: Final = struct.Struct(">H")
_TAIL_OF_HEAD: Final = struct.Struct(">qqqH")  # what the CRC covers of the fixed part
FIXED_BYTES: Final = _HEAD.size  # 34: the fixed part of a record
FLAG_KEY: Final = 0x1
FLAG_MORE: Final = 0x2  # more records of the same publish follow this one
MAX_KEY_BYTES: Final = 1024  # an idempotence key is an id, not data
# Headers are checked one by one in Python as a publish arrives (~0.5 us each, on the
# loop): bounded per message and per publish, so no publish costs the service much more
# than its bytes (2.6 million empty headers in one 15 MiB publish stalled every connection
# for 1.3 s; 65,536 cost about what a 15 MiB publish without headers does).
MAX_HEADERS: Final = 64  # headers of one message
MAX_PUBLISH_HEADERS: Final = 65_536  # headers of all the messages of one publish
# The smallest record: the fixed part and a content with no header and an empty body.
_MIN_RECORD: Final = FIXED_BYTES + 2
# where the fixed fields are from a record's start (`_HEAD`'s layout), for `record_offset`
# and for readers in bulk (`record_starts`)
OFFSET_AT: Final = 8
TIMESTAMP_AT: Final = 16
FLAGS_AT: Final = 32
_MAX_RECORD: Final = 2**31  # a length beyond is corruption, not a message


class RecordError(ValueError):
    """Bytes that are not well-formed entries or records; the message says where and why."""


class TooManyEntriesError(RecordError):
    """A publish's body holds more entries than allowed."""


@dataclass(slots=True)
class Record:
    """One decoded message record."""

    offset: int
    timestamp_ms: int
    deliver_at_ms: int
    headers: dict[str, str]
    body: bytes
    key: str | None = None
    batch_count: int = 0


@dataclass(slots=True)
class Scan:
    """What `scan` found in a segment's bytes."""

    positions: list[int] = field(default_factory=list)  # where each whole record starts
    offsets: list[int] = field(default_factory=list)  # and its offset
    # key, first, count, ms: of the batches whose every record was found
    keys: list[tuple[str, int, int, int]] = field(default_factory=list)
    deferred: list[tuple[int, int]] = field(default_factory=list)  # (offset, deliver_at_ms)
    valid_bytes: int = 0  # the length of the good prefix
    problem: Literal["torn", "corrupt"] | None = None
    reason: str = ""
    # the index (in positions) of the first record of a publish whose last record was not
    # found (None: every publish found is whole), and how many records it announced (its
    # key's batch_count; 0: not known)
    unfinished: int | None = None
    unfinished_count: int = 0

    def cut(self, index: int) -> None:
        """Keep only the records before ``index`` (and the keys and deferred offsets of
        what is kept whole)."""
        if index >= len(self.offsets):
            return
        offset = self.offsets[index]
        self.valid_bytes = self.positions[index]
        del self.offsets[index:], self.positions[index:]
        self.keys = [key for key in self.keys if key[1] + key[2] <= offset]
        self.deferred = [item for item in self.deferred if item[0] < offset]
        if self.unfinished is not None and self.unfinished >= index:
            self.unfinished = None
            self.unfinished_count = 0


def encode_content(headers: Mapping[str, str] | None, body: bytes) -> bytes:
    """Return a message's content (headers and body).

    Raises:
        TypeError: a header key or value is not a `str`, or ``body`` is not bytes.
        ValueError: more than `MAX_HEADERS` (64) headers, or a key over 65,535 bytes.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"a message body must be bytes, got {type(body).__name__}")
    if not headers:
        return b"\x00\x00" + bytes(body)
    if not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping of str to str, got "
                        f"{type(headers).__name__}")
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"a message has at most {MAX_HEADERS} headers, got {len(headers)}: "
                         f"put the rest in its body")
    parts = [_U16.pack(len(headers))]
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"header keys and values must be str, got {key!r}: {value!r}")
        k = key.encode()
        v = value.encode()
        if len(k) > 0xFFFF:
            raise ValueError(f"a header key is at most 65,535 bytes, got {len(k)}")
        parts += (_U16.pack(len(k)), k, _LENGTH.pack(len(v)), v)
    parts.append(bytes(body))
    return b"".join(parts)


def pack_entries(contents: list[bytes]) -> bytes:
    """Return ``contents`` as entries, back to back (a publish's body)."""
    pack = _LENGTH.pack
    return b"".join([piece for content in contents for piece in (pack(len(content)), content)])


def _check_headers(data: bytes | memoryview, start: int, end: int) -> int:
    """Check that ``data[start:end]`` begins with well-formed headers; return their count.

    Raises:
        RecordError: more than `MAX_HEADERS`, a length runs past ``end``, or a key or
            value is not UTF-8.
    """
    if end - start < 2:
        raise RecordError(f"a message content needs 2 bytes of header count, got {end - start}")
    (count,) = _U16.unpack_from(data, start)
    if count > MAX_HEADERS:
        raise RecordError(f"{count} headers, at most {MAX_HEADERS}")
    pos = start + 2
    for _ in range(count):
        if pos + 2 > end:
            raise RecordError("a header key length runs past the message")
        (k_len,) = _U16.unpack_from(data, pos)
        pos += 2
        key_end = pos + k_len
        if key_end + 4 > end:
            raise RecordError("a header key runs past the message")
        (v_len,) = _LENGTH.unpack_from(data, key_end)
        value_end = key_end + 4 + v_len
        if value_end > end:
            raise RecordError("a header value runs past the message")
        try:
            bytes(data[pos:key_end]).decode()
            bytes(data[key_end + 4:value_end]).decode()
        except UnicodeDecodeError:
            raise RecordError("a header key or value is not UTF-8") from None
        pos = value_end
    return int(count)


def split_entries(data: bytes, max_count: int | None = None) -> list[bytes]:
    """Return the contents of the entries in ``data`` (a publish's body), each checked.

    Raises:
        RecordError: no entry, an entry cut short, headers that are not well-formed, more
            than `MAX_HEADERS` in a message or `MAX_PUBLISH_HEADERS` in all (found before
            the rest is read).
        TooManyEntriesError: more than ``max_count`` entries (found before the rest is
            read).
    """
    contents: list[bytes] = []
    headers = 0
    pos = 0
    size = len(data)
    view = memoryview(data)
    while pos < size:
        if max_count is not None and len(contents) == max_count:
            raise TooManyEntriesError(f"more than {max_count} messages")
        if pos + 4 > size:
            raise RecordError(f"entry {len(contents)}: its length is cut short")
        (length,) = _LENGTH.unpack_from(data, pos)
        start = pos + 4
        end = start + length
        if end > size:
            raise RecordError(f"entry {len(contents)}: {length} bytes announced, "
                              f"{size - start} left")
        if length < 2:
            raise RecordError(f"entry {len(contents)}: a message content needs 2 bytes of "
                              f"header count, got {length}")
        if data[start] or data[start + 1]:  # headers to check (most messages have none)
            try:
                headers += _check_headers(view, start, end)
            except RecordError as exc:
                raise RecordError(f"entry {len(contents)}: {exc}") from None
            if headers > MAX_PUBLISH_HEADERS:
                raise RecordError(f"entry {len(contents)}: more than {MAX_PUBLISH_HEADERS} "
                                  f"headers in one publish: split the batch")
        contents.append(data[start:end])
        pos = end
    if not contents:
        raise RecordError("no message in the publish")
    return contents


def build_record(offset: int, timestamp_ms: int, deliver_at_ms: int, content: bytes,
                 key: str | None = None, batch_count: int = 0, more: bool = False) -> bytes:
    """Return the record of one message (``key``: its publish's idempotence key, on the
    first message of the batch of ``batch_count``; ``more``: not the publish's last)."""
    flags = FLAG_MORE if more else 0
    if key is None:
        tail = _TAIL_OF_HEAD.pack(offset, timestamp_ms, deliver_at_ms, flags)
    else:
        k = key.encode()
        tail = (_TAIL_OF_HEAD.pack(offset, timestamp_ms, deliver_at_ms, flags | FLAG_KEY)
                + _U16.pack(len(k)) + k + _LENGTH.pack(batch_count))
    crc = zlib.crc32(content, zlib.crc32(tail))
    return _LENGTH.pack(4 + len(tail) + len(content)) + _LENGTH.pack(crc) + tail + content


def record_offset(record: bytes | memoryview, pos: int = 0) -> int:
    """Return the offset field of the record at ``pos``."""
    return struct.unpack_from(">q", record, pos + OFFSET_AT)[0]  # type: ignore[no-any-return]


def read_headers(data: bytes | memoryview, pos: int) -> tuple[dict[str, str], int]:
    """Return the headers of the content at ``pos`` and where its body starts.

    Raises:
        struct.error, IndexError, UnicodeDecodeError: not well-formed headers.
    """
    (count,) = _U16.unpack_from(data, pos)
    pos += 2
    headers: dict[str, str] = {}
    for _ in range(count):
        (k_len,) = _U16.unpack_from(data, pos)
        key = bytes(data[pos + 2:pos + 2 + k_len]).decode()
        pos += 2 + k_len
        (v_len,) = _LENGTH.unpack_from(data, pos)
        headers[key] = bytes(data[pos + 4:pos + 4 + v_len]).decode()
        pos += 4 + v_len
    return headers, pos


Fields = tuple[int, int, int, dict[str, str], bytes, str | None, int]


def record_fields(data: bytes) -> list[Fields]:
    """Return each record of ``data`` (a delivery or a pull answer) as a tuple: offset,
    timestamp_ms, deliver_at_ms, headers, body, key, batch_count. CRCs are not checked (TCP
    did); this is the per-message path of a consumer, so it builds no object per record.

    Raises:
        RecordError: the bytes are not whole records.
    """
    records: list[Fields] = []
    pos = 0
    size = len(data)
    unpack = _HEAD.unpack_from
    try:
        while pos < size:
            length, _, offset, ts, deliver_at, flags = unpack(data, pos)
            end = pos + 4 + length
            if end > size or length < _MIN_RECORD - 4:
                raise RecordError(f"a record at byte {pos} runs past the data")
            at = pos + FIXED_BYTES
            key = None
            count = 0
            if flags & FLAG_KEY:
                (k_len,) = _U16.unpack_from(data, at)
                key = data[at + 2:at + 2 + k_len].decode()
                (count,) = _LENGTH.unpack_from(data, at + 2 + k_len)
                at += 6 + k_len
            if data[at] or data[at + 1]:
                headers, at = read_headers(data, at)
            else:
                headers = {}
                at += 2
            records.append((offset, ts, deliver_at, headers, data[at:end], key, count))
            pos = end
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise RecordError(f"a record at byte {pos} is not well-formed: {exc}") from None
    return records


def record_starts(data: bytes) -> list[int]:
    """Return where each record of ``data`` (a delivery or a pull answer) starts, each
    checked to hold its fixed part and an empty content at least, for a reader that takes
    the fields in bulk (at `OFFSET_AT`, `TIMESTAMP_AT`, `FLAGS_AT` from each start).

    Raises:
        RecordError: the bytes are not whole records.
    """
    starts: list[int] = []
    pos = 0
    size = len(data)
    unpack = _LENGTH.unpack_from
    while pos < size:
        if pos + 4 > size:
            raise RecordError(f"a record at byte {pos} runs past the data")
        (length,) = unpack(data, pos)
        if pos + 4 + length > size or length < _MIN_RECORD - 4:
            raise RecordError(f"a record at byte {pos} runs past the data")
        starts.append(pos)
        pos += 4 + length
    return starts


def decode_records(data: bytes) -> list[Record]:
    """Return the records of ``data`` as `Record` objects (see `record_fields`).

    Raises:
        RecordError: the bytes are not whole records.
    """
    return [Record(*fields) for fields in record_fields(data)]


def scan(data: bytes | memoryview) -> Scan:
    """Walk a segment's bytes: every whole, intact record, where and why it stops, and
    where an unfinished publish starts (see the module docstring)."""
    found = Scan()
    pos = 0
    size = len(data)
    batch_open = False  # the last record said more of its publish follow
    batch_index = 0  # where the publish being read started (an index in positions)
    expected = seen = 0  # its records announced by its key (0: not known), and found
    batch_key: tuple[str, int, int, int] | None = None
    while pos < size:
        if size - pos < 4:
            found.problem, found.reason = "torn", f"{size - pos} bytes of a length at the end"
            break
        (length,) = _LENGTH.unpack_from(data, pos)
        if length < _MIN_RECORD - 4 or length > _MAX_RECORD:
            found.problem, found.reason = "corrupt", f"impossible record length {length}"
            break
        end = pos + 4 + length
        if end > size:
            found.problem = "torn"
            found.reason = f"a record of {length} bytes cut short at {size - pos - 4}"
            break
        (crc,) = _LENGTH.unpack_from(data, pos + 4)
        if zlib.crc32(data[pos + 8:end]) != crc:
            found.problem, found.reason = "corrupt", "CRC mismatch"
            break
        _, _, offset, ts, deliver_at, flags = _HEAD.unpack_from(data, pos)
        if not batch_open or flags & FLAG_KEY:  # a publish starts (a key opens one)
            batch_index = len(found.positions)
            expected = seen = 0
            batch_key = None
        if flags & FLAG_KEY:
            at = pos + FIXED_BYTES
            (k_len,) = _U16.unpack_from(data, at)
            key = bytes(data[at + 2:at + 2 + k_len]).decode(errors="replace")
            (expected,) = _LENGTH.unpack_from(data, at + 2 + k_len)
            batch_key = (key, offset, expected, ts)
        seen += 1
        batch_open = bool(flags & FLAG_MORE) or seen < expected
        if not batch_open and batch_key is not None:
            found.keys.append(batch_key)  # every record of its batch is here
        if deliver_at:
            found.deferred.append((offset, deliver_at))
        found.positions.append(pos)
        found.offsets.append(offset)
        pos = end
    found.valid_bytes = pos
    if batch_open:
        found.unfinished = batch_index
        found.unfinished_count = expected
    return found
