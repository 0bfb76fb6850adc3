"""An executor's decode of a queue pull's answer into the ``remoting`` source's Arrow batch
(`records_batch`, no Python object per record): the same rows as the records decoded one by
one (`record_fields`), with keys, headers and empty bodies, cut at the range's end; bytes
that are not whole records raise `RecordError` and nothing else. No Spark, no sockets."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.queue._messages import PulledRecords
from remoting.queue._sansio._records import (
    RecordError,
    build_record,
    encode_content,
    record_fields,
)
from remoting.spark._streaming._reading import arrow_schema, records_batch

headers = st.dictionaries(st.text(max_size=5), st.text(max_size=8), max_size=3)
messages = st.lists(st.tuples(st.binary(max_size=40), st.one_of(st.none(), headers),
                              st.one_of(st.none(), st.text(min_size=1, max_size=6))),
                    max_size=30)


def answer(contents: list[tuple[bytes, dict[str, str] | None, str | None]],
           first: int = 0) -> PulledRecords:
    return PulledRecords("t", b"".join(
        build_record(first + i, 1_700_000_000_000 + i, 0, encode_content(heads, body),
                     key=key, batch_count=3)
        for i, (body, heads, key) in enumerate(contents)))


def one_by_one(pulled: PulledRecords, end: int) -> pa.RecordBatch:
    rows = [f for f in record_fields(pulled.data) if f[0] < end]
    return pa.record_batch({
        "offset": pa.array([f[0] for f in rows], pa.int64()),
        "timestamp": pa.array([f[1] * 1000 for f in rows], pa.timestamp("us", tz="UTC")),
        "headers": pa.array([list(f[3].items()) for f in rows],
                            arrow_schema().field("headers").type),
        "body": pa.array([f[4] for f in rows], pa.binary()),
    }, schema=arrow_schema())


@settings(max_examples=200, deadline=None)
@given(messages, st.integers(0, 40))
def test_the_columns_are_the_records_decoded_one_by_one(
        contents: list[tuple[bytes, dict[str, str] | None, str | None]], cut: int) -> None:
    pulled = answer(contents, first=100)
    end = 100 + cut

    batch, offsets = records_batch(pulled, end)

    assert batch.equals(one_by_one(pulled, end))
    assert offsets == list(range(100, 100 + min(cut, len(contents))))


def test_a_key_and_headers_move_the_body_and_an_empty_body_stays_empty() -> None:
    pulled = answer([(b"", {"a": "1", "bb": ""}, "key-1"), (b"x" * 5, None, "k"),
                     (b"", None, None), (b"tail", {"z": "\u00e9"}, None)])

    batch, _ = records_batch(pulled, 10)

    assert batch.column("body").to_pylist() == [b"", b"xxxxx", b"", b"tail"]
    assert batch.column("headers").to_pylist() == [[("a", "1"), ("bb", "")], [], [],
                                                   [("z", "\u00e9")]]


@pytest.mark.parametrize("damage", ["truncated", "key_past_end", "headers_past_end"])
def test_bytes_that_are_not_whole_records_raise_record_error(damage: str) -> None:
    good = answer([(b"body", {"hdr": "v"}, "key")]).data
    if damage == "truncated":
        data = good[:-1]
    elif damage == "key_past_end":  # the key's length says 60,000 bytes
        data = good[:34] + b"\xea\x60" + good[36:]
    else:  # the header value's length says 1,000 bytes
        at = good.index(b"\x00\x03hdr") + 5
        data = good[:at] + (1000).to_bytes(4, "big") + good[at + 4:]

    with pytest.raises(RecordError):
        records_batch(PulledRecords("t", data), 10)


@pytest.mark.parametrize("millis", [2**62, -(2**62), 2**63 - 1])
def test_a_timestamp_beyond_the_columns_range_raises_record_error(millis: int) -> None:
    data = build_record(0, millis, 0, encode_content(None, b"x"), batch_count=1)

    with pytest.raises(RecordError, match="timestamp"):  # (its microseconds would wrap)
        records_batch(PulledRecords("t", data), 10)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_gives_a_batch_or_record_error_and_nothing_else(data: bytes) -> None:
    try:
        batch, offsets = records_batch(PulledRecords("t", data), 2**62)
    except RecordError:
        return
    assert batch.num_rows == len(offsets)
