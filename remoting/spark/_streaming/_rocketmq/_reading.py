"""Reading a partition of the ``rocketmq`` source on an executor, as Arrow batches of its
schema.

A partition is queue ranges (`Segment`) planned by the driver and kept in Spark's
checkpoint. Each range is read in chunks of `CHUNK_WINDOWS` pulls: one round of pipelined
explicit pulls (`remoting.rocketmq`'s `read_range`, nothing committed), then one decode of
the answers into an Arrow batch (`messages_batch`, no Python object per message). Without a
tag expression a chunk must hold every offset it asked for but those the broker reported
gone: a gap is an error of the broker, never skipped silently.

Offsets the broker no longer holds (below a queue's first offset: its commit log was
deleted; past its end: the queue was made afresh) raise `RocketMQMessagesLostError`, or
with ``failOnDataLoss=false`` are logged (``rocketmq.messages_lost``) and skipped, as
Spark's Kafka source does.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

from ....rocketmq._arrow_codec import messages_batch
from ....rocketmq._errors import MalformedResponseError
from ..._fleet import log
from .._reading import MessagesLostError, arrow_schema_of

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ._cluster import Cluster
    from ._offsets import Segment
    from ._options import SourceOptions

__all__ = ["CHUNK_WINDOWS", "RocketMQMessagesLostError", "arrow_schema", "read_segments",
           "spark_schema"]

CHUNK_WINDOWS: Final = 128  # pulls per chunk: 4,096 offsets with windows of 32


class RocketMQMessagesLostError(MessagesLostError):
    """Offsets of a RocketMQ queue that a query had not read are gone
    (``failOnDataLoss=true``): below the queue's first offset (the broker deleted the commit
    log holding them: its ``fileReservedTime``), or past its end (the queue, or the topic,
    was made afresh and numbers its messages from 0 again). The task (or the planning)
    fails; the checkpoint is unchanged.

    Attributes:
        topic, broker_name, queue_id: the queue.
        first: the first offset missing.
        end: the offset after the last one missing.
        incarnations: None (RocketMQ's queues have none).
    """

    def __init__(self, addr: str | None, topic: str, broker_name: str, queue_id: int,
                 first: int, end: int, why: str = "the broker no longer holds them") -> None:
        self.topic = topic
        self.broker_name = broker_name
        self.queue_id = queue_id
        self.first = first
        self.end = end
        self.incarnations = None
        message = (f"queue {queue_id} of topic {topic!r} on {broker_name}: offsets {first} to "
                   f"{end - 1}, which the query has not read, are gone ({why}); start the "
                   "query with a new checkpoint location, or set failOnDataLoss=false to skip "
                   "them")
        super(MessagesLostError, self).__init__(message, addr)


def spark_schema() -> StructType:
    """Return the source's schema as a Spark `StructType`."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType([
        StructField("body", BinaryType(), False),
        StructField("topic", StringType(), False),
        StructField("broker_name", StringType(), False),
        StructField("queue_id", IntegerType(), False),
        StructField("queue_offset", LongType(), False),
        StructField("msg_id", StringType(), False),
        StructField("tags", StringType(), True),
        StructField("keys", ArrayType(StringType(), False), False),
        StructField("properties", MapType(StringType(), StringType(), False), False),
        StructField("born_timestamp", TimestampType(), False),
        StructField("store_timestamp", TimestampType(), False),
    ])


@functools.cache
def arrow_schema() -> pa.Schema:
    """Return the Arrow schema Spark expects of the source's batches."""
    return arrow_schema_of(spark_schema())


def for_spark(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Return a batch of `ARROW_SCHEMA` as Spark expects it (its timestamps in µs)."""
    import pyarrow as pa

    target = arrow_schema()
    return pa.RecordBatch.from_arrays(
        [batch.column(i).cast(field.type) for i, field in enumerate(target)], schema=target)


def lost(options: SourceOptions, addr: str | None, segment: Segment, first: int, end: int,
         why: str) -> None:
    """Fail for offsets ``[first, end)`` of ``segment``'s queue, or log and skip them."""
    if options.fail_on_data_loss:
        raise RocketMQMessagesLostError(addr, segment.topic, segment.broker, segment.queue_id,
                                        first, end, why)
    log.warning("rocketmq.messages_lost", topic=segment.topic, broker=segment.broker,
                queue=segment.queue_id, first=first, end=end, why=why)


def read_segments(cluster: Cluster, options: SourceOptions, segments: list[Segment],
                  addresses: Mapping[str, str]) -> Iterator[pa.RecordBatch]:
    """Yield the messages of ``segments`` (in order, each in offset order) as Arrow batches
    of the source's schema; ``addresses`` gives each broker's address.

    Raises:
        RocketMQMessagesLostError: offsets are gone (``failOnDataLoss``).
        MalformedResponseError: an answer does not decode, or skips offsets.
        MQBrokerError, RemotingError: a broker refused or could not be reached.
    """
    from ._offsets import Segment

    tags = options.tags
    for segment in segments:
        addr = addresses.get(segment.broker)
        if addr is None:  # the route lost the broker since planning: ask again
            addr = cluster.queues([segment.topic]).get(segment.key)
        if addr is None:
            raise MalformedResponseError(f"no broker named {segment.broker} in the route of "
                                         f"{segment.topic!r}: it went away since planning")
        window = options.pull_batch
        at = segment.start
        while at < segment.end:
            upto = min(segment.end, at + window * CHUNK_WINDOWS)
            chunk = Segment(segment.topic, segment.broker, segment.queue_id, at, upto)
            read = cluster.read(chunk, addr, options, window=window)
            if read.capped is not None:  # the broker serves fewer a pull: ask for as many
                window = max(1, read.capped)
            for first, end in read.lost:
                lost(options, addr, segment, first, end,
                     "below the queue's first offset, the commit log holding them deleted"
                     if end <= read.min_offset or first < read.min_offset else
                     "past the queue's end: the queue was made afresh, or lost its tail")
            batch, error = messages_batch(read.bodies, read.windows, segment.broker, tags)
            if error is not None:
                raise error
            if not tags:
                expected = chunk.size - sum(b - a for a, b in read.lost)
                if batch.num_rows != expected:
                    raise MalformedResponseError(
                        f"the broker answered {batch.num_rows} messages of offsets {at} to "
                        f"{upto - 1} of queue {segment.queue_id} of {segment.topic!r}, "
                        f"{expected} expected", addr)
            if batch.num_rows:
                yield for_spark(batch)
            at = upto

