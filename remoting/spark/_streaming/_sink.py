"""The ``remoting`` streaming sink: each micro-batch published to a topic, nothing twice
when Spark runs a batch again.

Every task publishes its partition's rows in chunks (`chunks`: at most `PUBLISH_MESSAGES`
messages or `PUBLISH_BYTES` bytes each), each chunk one ``publish_many`` tagged with an
idempotence key ``spark/<query id>/<batch id>/<partition>/<chunk>``. Spark runs a batch again
with the same id (a task retried, or a query restarted from its checkpoint before the batch
was committed), so the same rows make the same chunks with the same keys, and the service
answers a key it has seen with the offsets it gave the first time, appending nothing. The
service remembers a key for its ``dedup_window`` (600 s by default, across restarts with a
data directory); a batch run again after that is published again.

The chunks depend on the rows' order within the partition: a partition that comes out of a
shuffle in another order on its second run makes other chunks. docs/spark.md says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from .._fleet import log
from ._calls import QueueCalls

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ._options import SinkOptions

__all__ = ["PUBLISH_BYTES", "PUBLISH_MESSAGES", "QueueStreamWriter", "SinkCommit", "chunks",
           "key_of"]

PUBLISH_MESSAGES: Final = 4096  # messages in one publish at most: as a pull answers
PUBLISH_BYTES: Final = 4 * 1024 * 1024  # and bytes: well below the 16 MiB frame limit
QUERY_ID: Final = "sql.streaming.queryId"  # Spark's local properties of a streaming task
BATCH_ID: Final = "streaming.sql.batchId"
COLUMNS: Final = ("body", "headers")

Content = tuple[bytes, dict[str, str]]


@dataclass(slots=True)
class SinkCommit(WriterCommitMessage):
    """What one task published: messages appended, and those the service had already."""

    partition: int
    published: int = 0
    duplicates: int = 0


def key_of(query: str, batch: str, partition: int, chunk: int) -> str:
    """Return the idempotence key of a chunk."""
    return f"spark/{query}/{batch}/{partition}/{chunk}"


def check_schema(schema: StructType) -> None:
    """Check the sink's input: a ``body`` (binary or string), optional ``headers``
    (map<string,string>), nothing else.

    Raises:
        ValueError: it is not so (the message names the column).
    """
    from pyspark.sql.types import BinaryType, MapType, StringType

    fields = {f.name: f.dataType for f in schema.fields}
    extra = sorted(set(fields) - set(COLUMNS))
    if "body" not in fields or extra:
        raise ValueError(
            "the remoting sink writes a column body (binary or string) and an optional "
            f"column headers (map<string,string>); got {', '.join(fields) or 'no column'}: "
            "select them, e.g. df.select(F.to_json(F.struct('*')).alias('body'))")
    if not isinstance(fields["body"], BinaryType | StringType):
        raise ValueError(f"the remoting sink's body must be binary or string, got "
                         f"{fields['body'].simpleString()}")
    headers = fields.get("headers")
    if headers is not None and not (isinstance(headers, MapType)
                                    and isinstance(headers.keyType, StringType)
                                    and isinstance(headers.valueType, StringType)):
        raise ValueError(f"the remoting sink's headers must be map<string,string>, got "
                         f"{headers.simpleString()}")


def rows_of(batches: Iterable[pa.RecordBatch]) -> Iterator[Content]:
    """Yield each row's body (bytes) and headers.

    Raises:
        ValueError: a row's body is null.
    """
    row = 0
    for batch in batches:
        bodies = batch.column("body").to_pylist()
        names = batch.schema.names
        headers = (batch.column("headers").to_pylist() if "headers" in names
                   else [None] * len(bodies))
        for body, heads in zip(bodies, headers, strict=True):
            if body is None:
                raise ValueError(f"row {row} of the partition has a null body: the remoting "
                                 "sink publishes every row (filter them out first)")
            yield (body.encode() if isinstance(body, str) else body,
                   {k: v for k, v in heads if v is not None} if heads else {})
            row += 1


def chunks(rows: Iterable[Content], max_messages: int = PUBLISH_MESSAGES,
           max_bytes: int = PUBLISH_BYTES) -> Iterator[list[Content]]:
    """Group ``rows`` into publishes: at most ``max_messages`` each, and closed once they
    pass ``max_bytes`` of bodies (the same rows in the same order make the same chunks)."""
    chunk: list[Content] = []
    size = 0
    for row in rows:
        chunk.append(row)
        size += len(row[0])
        if len(chunk) >= max_messages or size >= max_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class QueueStreamWriter(DataSourceStreamArrowWriter):
    """Publishes each micro-batch's partitions (see the module docstring)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_schema(schema)
        self.options = options
        self.calls = QueueCalls(options.queue)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise RuntimeError("the remoting sink writes in a Spark task only")
        query = context.getLocalProperty(QUERY_ID) or "no-query"
        batch = context.getLocalProperty(BATCH_ID) or "no-batch"
        partition = context.partitionId()
        done = SinkCommit(partition=partition)
        for number, chunk in enumerate(chunks(rows_of(iterator))):
            published = self.calls.publish(chunk, key_of(query, batch, partition, number))
            if published.duplicate:
                done.duplicates += len(chunk)
            else:
                done.published += len(chunk)
        return done

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int  # noqa: N803
               ) -> None:
        done = [m for m in messages if isinstance(m, SinkCommit)]
        duplicates = sum(m.duplicates for m in done)
        if duplicates:
            log.info("queue.batch_republished", topic=self.options.queue.topic,
                     batch=batchId, duplicates=duplicates)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int  # noqa: N803
              ) -> None:
        log.warning("queue.batch_aborted", topic=self.options.queue.topic, batch=batchId,
                    published=sum(m.published for m in messages if isinstance(m, SinkCommit)))
