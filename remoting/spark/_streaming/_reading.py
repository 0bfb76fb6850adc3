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
from typing import TYPE_CHECKING, Final

from ..._errors import RemotingError
from ..._messaging._records import record_fields
from ...queue._errors import QueueError
from ...queue._wire import MAX_PULL
from .._fleet import log

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ._calls import QueueCalls

__all__ = ["SCHEMA_DDL", "MessagesLostError", "arrow_schema", "read_range", "spark_schema"]

SCHEMA_DDL: Final = "offset long, timestamp timestamp, headers map<string,string>, body binary"


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


def records_batch(data: bytes, end: int) -> tuple[pa.RecordBatch, list[int]]:
    """Return the records of a pull's answer below ``end`` as an Arrow batch, and their
    offsets."""
    import pyarrow as pa

    schema = arrow_schema()
    offsets: list[int] = []
    stamps: list[int] = []
    headers: list[list[tuple[str, str]]] = []
    bodies: list[bytes] = []
    for offset, ts_ms, _, heads, body, _, _ in record_fields(data):
        if offset >= end:
            break
        offsets.append(offset)
        stamps.append(ts_ms * 1000)
        headers.append(list(heads.items()) if heads else [])
        bodies.append(body)
    batch = pa.record_batch([
        pa.array(offsets, schema.field("offset").type),
        pa.array(stamps, schema.field("timestamp").type),
        pa.array(headers, schema.field("headers").type),
        pa.array(bodies, schema.field("body").type),
    ], schema=schema)
    return batch, offsets


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
            data = calls.pull(cursor, min(MAX_PULL, end - cursor),
                              calls.options.timeout if waited else 0.0, incarnation)
        except QueueError as exc:  # no such topic, or the offset is past its end now
            _lost(calls, cursor, end, fail_on_data_loss, exc)
            return
        if not data:
            if not waited:  # nothing readable before the planned end: wait for it once
                waited = True
                continue
            _lost(calls, cursor, end, fail_on_data_loss)
            return
        waited = False
        batch, offsets = records_batch(data, end)
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
