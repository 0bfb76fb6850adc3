"""Reading an offset range of a topic on an executor, as Arrow batches of the source's schema.

A task reads ``[start, end)`` with pulls from an explicit offset (no group: the range is the
task's, planned by the driver and kept in Spark's checkpoint), each for up to 4,096 messages,
without waiting: the driver planned only offsets the service could serve. Each pull's records
become one Arrow batch, straight from the bytes (no message object per record).

The offsets must come back without a gap. One is missing when the service let it go (its
retention, a corrupt segment set aside, a restart without its data directory): the task then
raises `MessagesLostError`, or with ``failOnDataLoss=false`` logs ``queue.messages_lost`` and
goes on. A pull that answers nothing before ``end`` (the service lost the tail) waits once,
held for up to the call timeout, before it counts as lost.
"""

from __future__ import annotations

import functools
import struct
from typing import TYPE_CHECKING, Final

from ..._errors import RemotingError
from ...queue._errors import QueueError
from ...queue._sansio._records import (
    FIXED_BYTES,
    FLAG_KEY,
    FLAGS_AT,
    OFFSET_AT,
    TIMESTAMP_AT,
    RecordError,
    read_headers,
    record_starts,
)
from ...queue._wire import MAX_PULL
from .._fleet import log

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ...queue._messages import PulledRecords
    from ._calls import QueueCalls

__all__ = ["SCHEMA_DDL", "MessagesLostError", "arrow_schema", "read_range", "spark_schema"]

SCHEMA_DDL: Final = "offset long, timestamp timestamp, headers map<string,string>, body binary"
_MAX_MILLIS: Final = (2**63 - 1) // 1000  # the furthest a timestamp in microseconds reaches


class MessagesLostError(RemotingError):
    """Offsets a query had not read are gone from the topic (``failOnDataLoss=true``).

    The service let them go: its retention (another reader committed past them before this
    query's group existed), a corrupt segment set aside at start, or a restart without its
    data directory (the topic is then another log: its *incarnation* changed, and the
    offsets the query kept are the old log's). The task fails; the query stops unless Spark
    retries it.

    Attributes:
        topic: the topic.
        first: the first offset missing.
        end: the offset after the last one missing (``first`` when the log changed: how
            many the old one held past ``first`` is not known).
        incarnations: (the log's the query read, the log's now) when the log changed;
            None otherwise.
    """

    def __init__(self, addr: str | None, topic: str, first: int, end: int,
                 incarnations: tuple[str, str] | None = None) -> None:
        self.topic = topic
        self.first = first
        self.end = end
        self.incarnations = incarnations
        if incarnations is None:
            message = (f"topic {topic!r} no longer holds offsets {first} to {end - 1}, which "
                       "the query has not read (the queue service let them go); start the "
                       "query with a new checkpoint location, or set failOnDataLoss=false to "
                       "skip them")
        else:
            message = (f"topic {topic!r} is another log now (incarnation {incarnations[1]}, "
                       f"the query read {incarnations[0]}): the queue service started it "
                       f"afresh (a restart without its data directory), so what the old one "
                       f"held from offset {first} on, which the query had not read, is gone, "
                       "and the new one numbers its messages from its own start; start the "
                       "query with a new checkpoint location, or set failOnDataLoss=false to "
                       "read the new log from its start")
        super().__init__(message, addr)


def spark_schema() -> StructType:
    """Return the source's schema as a Spark `StructType` (no field is ever null)."""
    from pyspark.sql.types import (
        BinaryType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType([
        StructField("offset", LongType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("headers", MapType(StringType(), StringType(), False), False),
        StructField("body", BinaryType(), False),
    ])


def arrow_schema_of(schema: StructType) -> pa.Schema:
    """Return the Arrow schema Spark expects of a Python data source's batches of
    ``schema`` (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


@functools.cache
def arrow_schema() -> pa.Schema:
    """Return the Arrow schema Spark expects of the source's batches."""
    return arrow_schema_of(spark_schema())


def records_batch(pulled: PulledRecords, end: int) -> tuple[pa.RecordBatch, list[int]]:
    """Return the records of a pull's answer below ``end`` as an Arrow batch, and their
    offsets.

    The walk from one record to the next (`record_starts`) is the one step per record; the
    fixed fields are gathered with numpy from each record's start, and the bodies cut from
    the answer's bytes in one copy (`slices`). Headers are read one record at a time, only
    for the records that have some.

    It is stricter than `record_fields` (a consumer's path, which gives such a record an
    empty body): a key or headers that run past their record, or a timestamp out of
    ``timestamp``'s range, raise.

    Raises:
        RecordError: the answer is not whole, well-formed records (a broken service).
    """
    import numpy as np
    import pyarrow as pa

    from ..._arrow_slices import slices

    schema = arrow_schema()
    data = pulled.data
    starts = np.array(record_starts(data), dtype=np.int64)
    raw = np.frombuffer(data, dtype=np.uint8)
    offsets = _big_endian(raw, starts + OFFSET_AT, 8)
    past = offsets >= end
    count = int(np.argmax(past)) if past.any() else len(offsets)  # up to the first past it
    starts, offsets = starts[:count], offsets[:count]
    record_ends = starts + 4 + _big_endian(raw, starts, 4)
    content = starts + FIXED_BYTES
    keyed = np.flatnonzero(_big_endian(raw, starts + FLAGS_AT, 2) & FLAG_KEY)
    if len(keyed):  # a key (u16 length, the key, a u32 count) before the content
        content[keyed] += 6 + _big_endian(raw, content[keyed], 2)
    if np.any(content + 2 > record_ends):
        raise RecordError("a record's key runs past its end")
    body_at = content + 2
    headers_type = schema.field("headers").type
    with_headers = np.flatnonzero(raw[content] | raw[content + 1]).tolist()
    headers: list[list[tuple[str, str]]] = [[]] * count
    for i in with_headers:
        try:
            found, at = read_headers(data, int(content[i]))
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise RecordError(f"a record at byte {starts[i]} is not well-formed: {exc}"
                              ) from None
        if at > record_ends[i]:
            raise RecordError(f"the headers of a record at byte {starts[i]} run past it")
        headers[i] = list(found.items())
        body_at[i] = at
    millis = _big_endian(raw, starts + TIMESTAMP_AT, 8)
    if np.any((millis > _MAX_MILLIS) | (millis < -_MAX_MILLIS)):  # * 1000 would wrap
        raise RecordError("a record's timestamp is out of range")
    batch = pa.record_batch([
        pa.array(offsets, schema.field("offset").type),
        pa.array(millis * 1000, schema.field("timestamp").type),
        pa.array(headers, headers_type) if with_headers else pa.MapArray.from_arrays(
            np.zeros(count + 1, np.int32), pa.array([], pa.string()),
            pa.array([], pa.string()), type=headers_type),
        slices(pa.py_buffer(data), body_at, record_ends, pa.binary()),
    ], schema=schema)
    return batch, offsets.tolist()


def _big_endian(raw: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], size: int
                ) -> npt.NDArray[np.int64]:
    """Return the big-endian integers of ``size`` bytes at ``at`` in ``raw`` (signed for 8
    bytes, unsigned for 4 and 2)."""
    import numpy as np

    kind = {8: ">i8", 4: ">u4", 2: ">u2"}[size]
    picked = raw[at[:, None] + np.arange(size)]
    values: npt.NDArray[np.int64] = picked.view(kind).reshape(len(at)).astype(np.int64)
    return values


def read_range(calls: QueueCalls, start: int, end: int, *, fail_on_data_loss: bool = True,
               incarnation: str | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the messages of offsets ``[start, end)`` of the log ``incarnation`` (None: any)
    as Arrow batches, in offset order.

    Raises:
        MessagesLostError: offsets of the range are gone (``fail_on_data_loss``), also when
            the service refused a pull (no such topic, an offset past its end, or another
            log than ``incarnation``: a service that lost its messages; ``__cause__`` is
            its `QueueError`).
        RemotingError: the service stayed unreachable for ``reconnectTimeout``.
    """
    cursor = start
    waited = False
    while cursor < end:
        try:
            pulled = calls.pull(cursor, min(MAX_PULL, end - cursor),
                              calls.options.timeout if waited else 0.0, incarnation)
        except QueueError as exc:  # no such topic, or the offset is past its end now
            _lost(calls, cursor, end, fail_on_data_loss, exc)
            return
        if not pulled:
            if not waited:  # nothing readable before the planned end: wait for it once
                waited = True
                continue
            _lost(calls, cursor, end, fail_on_data_loss)
            return
        waited = False
        batch, offsets = records_batch(pulled, end)
        if not offsets:  # every record is past the range: the rest of it is gone
            _lost(calls, cursor, end, fail_on_data_loss)
            return
        if offsets[0] != cursor or offsets[-1] - offsets[0] + 1 != len(offsets):
            _gaps(calls, cursor, offsets, fail_on_data_loss)
        yield batch
        cursor = offsets[-1] + 1


def _gaps(calls: QueueCalls, cursor: int, offsets: list[int], fail: bool) -> None:
    expected = cursor
    for offset in offsets:
        if offset != expected:
            _lost(calls, expected, offset, fail)
        expected = offset + 1


def _lost(calls: QueueCalls, first: int, end: int, fail: bool,
          cause: QueueError | None = None) -> None:
    if fail:
        raise MessagesLostError(calls.options.addresses[0], calls.topic, first, end
                                ) from cause
    log.warning("queue.messages_lost", topic=calls.topic, first=first, end=end)
