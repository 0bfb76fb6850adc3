"""The queue's message formats (sans-I/O): entries and records round-trip; a scan of a
segment's bytes tells a torn tail from corruption; garbage is a `RecordError`, nothing else."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.queue._sansio._records import (
    FIXED_BYTES,
    RecordError,
    build_record,
    decode_records,
    encode_content,
    pack_entries,
    record_offset,
    scan,
    split_entries,
)

headers_st = st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4)


@given(st.lists(st.tuples(headers_st, st.binary(max_size=300)), min_size=1, max_size=10))
def test_entries_and_records_round_trip(messages: list[tuple[dict[str, str], bytes]]) -> None:
    contents = split_entries(pack_entries([encode_content(h, b) for h, b in messages]))
    records = b"".join(build_record(100 + i, 5, 0, content, "k" if i == 0 else None,
                                    len(contents) if i == 0 else 0)
                       for i, content in enumerate(contents))
    decoded = decode_records(records)
    assert [(r.headers, r.body) for r in decoded] == messages
    assert [r.offset for r in decoded] == list(range(100, 100 + len(messages)))
    assert decoded[0].key == "k" and decoded[0].batch_count == len(messages)
    found = scan(records)
    assert found.problem is None and found.valid_bytes == len(records)
    assert found.offsets == [r.offset for r in decoded]
    assert found.keys == [("k", 100, len(messages), 5)]
    assert record_offset(records, found.positions[-1]) == decoded[-1].offset


def test_a_scan_stops_at_a_torn_tail() -> None:
    one = build_record(0, 1, 0, encode_content(None, b"x" * 50))
    two = build_record(1, 1, 7, encode_content({"a": "b"}, b"y" * 50))
    found = scan(one + two[:-3])
    assert (found.problem, found.valid_bytes, found.offsets) == ("torn", len(one), [0])
    assert scan(one + two[:2]).problem == "torn"
    assert scan(one + two).deferred == [(1, 7)]


def test_a_scan_stops_at_corruption() -> None:
    one = build_record(0, 1, 0, encode_content(None, b"x" * 50))
    bad = bytearray(build_record(1, 1, 0, encode_content(None, b"y" * 50)))
    bad[-1] ^= 0xFF
    found = scan(one + bytes(bad) + one)
    assert (found.problem, found.reason, found.valid_bytes) == (
        "corrupt", "CRC mismatch", len(one))
    assert scan(one + b"\x00\x00\x00\x01" + bytes(40)).problem == "corrupt"  # length 1


def test_a_record_checksum_covers_everything_after_it() -> None:
    record = build_record(3, 4, 5, b"\x00\x00body")
    assert zlib.crc32(record[8:]) == int.from_bytes(record[4:8], "big")
    assert len(record) == FIXED_BYTES + 6


@pytest.mark.parametrize(("data", "says"), [
    (b"", "no message"),
    (b"\x00\x00\x00\x05\x00", "5 bytes announced"),
    (b"\x00\x00\x00\x01\x00", "needs 2 bytes"),
    (b"\x00\x00", "length is cut short"),
    (b"\x00\x00\x00\x04\x00\x01\x00\x09", "runs past"),
    (b"\x00\x00\x00\x0b\x00\x01\x00\x01\xff\x00\x00\x00\x00zz", "not UTF-8"),
])
def test_bad_entries_are_refused_with_the_reason(data: bytes, says: str) -> None:
    with pytest.raises(RecordError, match=says):
        split_entries(data)


@pytest.mark.parametrize(("headers", "body", "error"), [
    ({"a": 1}, b"", TypeError),
    ({1: "a"}, b"", TypeError),
    (None, "text", TypeError),
    (["a"], b"", TypeError),
])
def test_bad_content_is_refused(headers: object, body: object, error: type) -> None:
    with pytest.raises(error):
        encode_content(headers, body)  # type: ignore[arg-type]


@given(st.binary(max_size=300))
def test_garbage_entries_are_a_record_error_or_contents(data: bytes) -> None:
    try:
        split_entries(data)
    except RecordError:
        pass


@given(st.binary(max_size=300))
def test_garbage_records_are_a_record_error_or_records(data: bytes) -> None:
    try:
        decode_records(data)
    except RecordError:
        pass
    found = scan(data)
    assert found.valid_bytes <= len(data)
    assert (found.problem is None) == (found.valid_bytes == len(data))


def _publish(first: int, count: int, key: str | None = None) -> list[bytes]:
    """The records of one publish, as the service writes them (`Topic.append`)."""
    return [build_record(first + i, 1, 0, encode_content(None, b"m%d" % (first + i)),
                         key if i == 0 else None, count if i == 0 else 0, i < count - 1)
            for i in range(count)]


@pytest.mark.parametrize("key", [None, "k"])
def test_a_scan_finds_where_an_unfinished_publish_starts(key: str | None) -> None:
    done = _publish(0, 3, "a")
    cut = _publish(3, 4, key)
    found = scan(b"".join(done + cut[:2]))  # whole records, then the write stopped
    assert found.problem is None and found.unfinished == 3
    assert found.unfinished_count == (4 if key else 0)
    assert found.keys == [("a", 0, 3, 1)]  # not the unfinished publish's key
    torn = scan(b"".join(done + cut[:2]) + cut[2][:-1])  # ...or in the middle of one
    assert torn.problem == "torn" and torn.unfinished == 3
    whole = scan(b"".join(done + cut))
    assert whole.unfinished is None and len(whole.keys) == (2 if key else 1)
    whole.cut(3)
    assert whole.offsets == [0, 1, 2] and whole.keys == [("a", 0, 3, 1)]


def test_a_key_is_listed_only_for_a_batch_found_whole() -> None:
    records = _publish(0, 5, "k")
    bad = bytearray(records[3])
    bad[-1] ^= 0xFF  # corruption inside the batch: its first records are kept, not its key
    found = scan(b"".join(records[:3]) + bytes(bad) + records[4])
    assert found.problem == "corrupt" and found.offsets == [0, 1, 2] and found.keys == []


def test_a_record_saying_more_follow_is_read_by_any_reader() -> None:
    records = b"".join(_publish(7, 3, "k"))
    assert [r.offset for r in decode_records(records)] == [7, 8, 9]
    assert decode_records(records)[0].key == "k"
