"""The ``rocketmq`` sink: each micro-batch (``df.writeStream.format("rocketmq")``) or a
DataFrame (``df.write.format("rocketmq")``) sent to RocketMQ, at least once.

Every task sends its partition's rows in batches (one SEND_BATCH_MESSAGE each: at most
``batchMessages`` messages and ``batchBytes`` bytes, one topic each), through the worker
process's producer (`producer_for`: one per process and settings). Columns: ``body``
(binary or string, required, not empty), ``tags`` (string), ``keys`` (string, keys
separated by spaces, or array<string>), ``properties`` (map<string,string>), ``topic``
(string; else option ``topic``).

A send RocketMQ does not confirm (a timeout, a broker lost after storing) fails the task, and
Spark sends the whole partition again: some messages may then be stored twice, as with
Spark's Kafka sink. Each message carries property ``spark_key``, the same whenever its row
is sent again: ``<query id>/<batch id>/<partition>/<row>`` for a stream (Spark runs a batch
again with the same id and the same rows), ``write/<stage>/<partition>/<row>`` for a
``df.write``, so consumers that must not see a message twice drop repeated keys. A row is
numbered by its place in its partition: a partition that comes out of a shuffle in another
order on a rerun numbers its rows otherwise (sort within partitions for stable keys).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from ..._fleet import log

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ....rocketmq import Producer
    from ....rocketmq._send import Outgoing
    from ._options import SinkOptions

__all__ = ["SPARK_KEY", "RocketMQBatchWriter", "RocketMQStreamWriter", "SentCommit",
           "check_schema", "outgoing", "producer_for"]

SPARK_KEY: Final = "spark_key"  # the property naming a row: the same on every resend
QUERY_ID: Final = "sql.streaming.queryId"  # Spark's local properties of a streaming task
BATCH_ID: Final = "streaming.sql.batchId"
COLUMNS: Final = ("body", "tags", "keys", "properties", "topic")

_producers: dict[tuple[object, ...], Producer] = {}
_producers_lock = threading.Lock()
_producers_pid = os.getpid()


@dataclass(slots=True)
class SentCommit(WriterCommitMessage):
    """What one task sent."""

    partition: int
    sent: int = 0
    batches: int = 0


def check_schema(schema: StructType, default_topic: str | None) -> None:
    """Check the sink's input columns (see the module docstring).

    Raises:
        ValueError: a column is missing, unknown or of another type (the message names it).
    """
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType

    fields = {f.name: f.dataType for f in schema.fields}
    extra = sorted(set(fields) - set(COLUMNS))
    if "body" not in fields or extra:
        raise ValueError(
            "the rocketmq sink writes a column body (binary or string) and the optional "
            "columns tags (string), keys (string or array<string>), properties "
            f"(map<string,string>) and topic (string); got {', '.join(fields) or 'none'}: "
            "select them, e.g. df.select(F.to_json(F.struct('*')).alias('body'))")
    keys, props = fields.get("keys"), fields.get("properties")
    kinds = {
        "body": (isinstance(fields["body"], BinaryType | StringType), "binary or string"),
        "tags": (isinstance(fields.get("tags"), StringType), "string"),
        "topic": (isinstance(fields.get("topic"), StringType), "string"),
        "keys": (isinstance(keys, StringType) or (
            isinstance(keys, ArrayType) and isinstance(keys.elementType, StringType)),
            "string or array<string>"),
        "properties": (isinstance(props, MapType) and isinstance(props.keyType, StringType)
                       and isinstance(props.valueType, StringType), "map<string,string>"),
    }
    for name, (ok, want) in kinds.items():
        if name in fields and not ok:
            raise ValueError(f"the rocketmq sink's column {name} must be {want}, got "
                             f"{fields[name].simpleString()}")
    if "topic" not in fields and default_topic is None:
        raise ValueError("the rocketmq sink needs option topic, or a column topic")


def producer_for(options: SinkOptions) -> Producer:
    """Return this process's producer for ``options``' cluster and group (started on first
    use; made again after a fork)."""
    global _producers_pid
    from ....rocketmq import Producer

    cluster = options.cluster
    key = (cluster.name_servers, cluster.credentials, cluster.config, options.producer_group,
           cluster.timeout)
    with _producers_lock:
        if _producers_pid != os.getpid():  # forked: the parent's threads are not ours
            _producers.clear()
            _producers_pid = os.getpid()
        producer = _producers.get(key)
        if producer is None:
            access, secret = cluster.credentials or (None, None)
            producer = Producer(list(cluster.name_servers), options.producer_group,
                                timeout=cluster.timeout, access_key=access,
                                secret_key=secret, client_config=cluster.config).start()
            _producers[key] = producer
        return producer


def outgoing(batches: Iterable[pa.RecordBatch], default_topic: str | None, row_key: str
             ) -> Iterator[tuple[str, Outgoing, int]]:
    """Yield each row as (topic, message, body bytes), its ``spark_key`` ``row_key`` and its
    row number.

    Raises:
        ValueError: a row's body is null or empty, or its topic null with no option topic.
    """
    from ....rocketmq._send import Outgoing

    row = 0
    for batch in batches:
        names = batch.schema.names
        columns = {name: batch.column(name).to_pylist() for name in COLUMNS if name in names}
        count = batch.num_rows
        none: list[None] = [None] * count
        for body, tags, keys, props, topic in zip(
                columns["body"], columns.get("tags", none), columns.get("keys", none),
                columns.get("properties", none), columns.get("topic", none), strict=True):
            if not body:
                raise ValueError(f"row {row} of the partition has a null or empty body: "
                                 "RocketMQ refuses empty messages (filter them out first)")
            topic = topic or default_topic
            if topic is None:
                raise ValueError(f"row {row} of the partition has a null topic and the sink "
                                 "has no option topic")
            data = body.encode() if isinstance(body, str) else body
            properties = {k: v for k, v in props if v is not None} if props else {}
            properties[SPARK_KEY] = f"{row_key}/{row}"
            if isinstance(keys, list):
                keys = [k for k in keys if k]
            yield topic, Outgoing(data, tags or None, keys or None, properties), len(data)
            row += 1


class _Writer:
    """What the stream and the batch writers share: sending a partition in batches."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_schema(schema, options.topic)
        self.options = options

    def send(self, batches: Iterator[pa.RecordBatch], row_key: str, partition: int
             ) -> SentCommit:
        producer = producer_for(self.options)
        done = SentCommit(partition=partition)
        pending: dict[str, tuple[list[Outgoing], int]] = {}

        def flush(topic: str) -> None:
            items, _ = pending.pop(topic)
            producer.send_batch(topic, items)
            done.sent += len(items)
            done.batches += 1

        for topic, message, size in outgoing(batches, self.options.topic, row_key):
            items, held = pending.get(topic, ([], 0))
            if items and held + size + 256 > self.options.batch_bytes:
                flush(topic)
                items, held = [], 0
            items.append(message)
            pending[topic] = (items, held + size + 256)  # 256: a message's header, about
            if len(items) >= self.options.batch_messages:
                flush(topic)
        for topic in list(pending):
            flush(topic)
        return done


class RocketMQStreamWriter(_Writer, DataSourceStreamArrowWriter):
    """Sends each micro-batch's partitions (see the module docstring)."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise RuntimeError("the rocketmq sink writes in a Spark task only")
        query = context.getLocalProperty(QUERY_ID) or "no-query"
        batch = context.getLocalProperty(BATCH_ID) or "no-batch"
        partition = context.partitionId()
        return self.send(iterator, f"{query}/{batch}/{partition}", partition)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int  # noqa: N803
               ) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int  # noqa: N803
              ) -> None:
        log.warning("rocketmq.batch_aborted", batch=batchId,
                    sent=sum(m.sent for m in messages if isinstance(m, SentCommit)))


class RocketMQBatchWriter(_Writer, DataSourceArrowWriter):
    """Sends a DataFrame's partitions (``df.write.format("rocketmq")``)."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise RuntimeError("the rocketmq sink writes in a Spark task only")
        partition = context.partitionId()
        return self.send(iterator, f"write/{context.stageId()}/{partition}", partition)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("rocketmq.batch_aborted", batch=None,
                    sent=sum(m.sent for m in messages if isinstance(m, SentCommit)))
