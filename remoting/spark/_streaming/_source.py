"""The ``remoting`` data source: a topic of the queue service as a Spark table, read by a
Structured Streaming query (``spark.readStream.format("remoting")``) or a batch read of an
offset range (``spark.read.format("remoting")``), and a streaming sink
(``df.writeStream.format("remoting")``, `QueueStreamWriter`).

Theory of operation (RocketMQ's pull consumer, with Spark keeping the offsets):
- The stream's offset is the topic's next offset to read (`StreamOffset`), with the
  incarnation of the topic's log, checkpointed by Spark. A log that is another one now (a
  service without a data directory restarted) fails the query with `MessagesLostError`, or
  with ``failOnDataLoss=false`` the query reads the new log from its start; each task's
  pulls name the incarnation too, so a restart between planning and reading is caught.
  Each trigger, the driver asks the service how far a pull reads now (OFFSETS'
  ``readable``) and plans ``[start, end)`` (`trigger_end`: ``maxMessagesPerTrigger``,
  ``Trigger.AvailableNow``); the range is split into tasks (`split_range`), each of which
  pulls its offsets on an executor (`read_range`). A range is read the same whenever it is
  read again, so a query restarted from its checkpoint neither loses nor repeats a message
  in a sink that keeps batch ids (the file sink does).
- When nothing new is readable, the driver holds a pull on the service for up to
  `IDLE_WAIT` seconds: it returns the moment a message arrives (RocketMQ's long polling),
  where Spark would otherwise ask again every 10 ms.
- The query's offsets live in Spark's checkpoint, so by default the source makes no consumer
  group and commits nothing: it neither holds the topic's retention nor, by moving a group,
  lets the service trim what other readers (a later query from ``earliest``) would read.
  With option ``group``, once Spark has committed a batch the source commits its end to that
  group, so the service reports the query's lag and keeps what it has not read; the group
  is made when the query's first batch is planned, at that batch's start (`latestOffset`
  finds it missing among the topic's groups, in the answer it asks for anyway), never by
  `initialOffset`, which Spark calls more than once per new query. A checkpoint written
  before this kept a ``spark-<id>`` group made for its query: that query goes on committing
  to it. A commit that fails is logged and made good by the next.

The reader objects are pickled to the executors and rebuilt in Spark's Python processes:
they hold options only, and each process reaches the service through its own client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from codec import ResponseCode

from ..._errors import RemotingError
from ...queue._errors import QueueError
from .._fleet import log
from ._calls import QueueCalls
from ._offsets import (
    StreamOffset,
    batch_start,
    resolve_start,
    split_range,
    trigger_end,
)
from ._options import SourceOptions, load_options, sink_options, source_options
from ._reading import MessagesLostError, read_range, spark_schema

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ._sink import QueueStreamWriter

__all__ = ["IDLE_WAIT", "OffsetRange", "QueueBatchReader", "QueueDataSource",
           "QueueStreamReader"]

NAME: Final = "remoting"
IDLE_WAIT: Final = 0.5  # seconds the driver holds a pull while there is nothing to read


class OffsetRange(InputPartition):
    """One task's offsets: ``[start, end)`` of the log ``incarnation`` (None: any)."""

    def __init__(self, start: int, end: int, incarnation: str | None = None) -> None:
        self.start = start
        self.end = end
        self.incarnation = incarnation


class QueueDataSource(DataSource):
    """The ``remoting`` format: read a topic of the queue service (streaming or batch),
    or publish a stream to one. Options: docs/spark.md, Streaming.

    Spark makes it when a read is loaded (``load()``) or a sink starts: its options are
    checked then, so a misspelt or wrong one fails there, named as documented.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        load_options(self.options)

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        """``offset long, timestamp timestamp, headers map<string,string>, body binary``."""
        return spark_schema()

    def reader(self, schema: StructType) -> QueueBatchReader:
        return QueueBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> QueueStreamReader:  # noqa: N802 (pyspark's)
        return QueueStreamReader(source_options(self.options, streaming=True))

    def streamWriter(self, schema: StructType, overwrite: bool) -> QueueStreamWriter:  # noqa: N802
        from ._sink import QueueStreamWriter

        return QueueStreamWriter(sink_options(self.options), schema)


def _read(calls: QueueCalls, partition: object, fail_on_data_loss: bool
          ) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, OffsetRange):  # Spark's one empty partition of no range
        return iter(())
    return read_range(calls, partition.start, partition.end,
                      fail_on_data_loss=fail_on_data_loss,
                      incarnation=getattr(partition, "incarnation", None))


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source (see the module docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.calls = QueueCalls(options.queue)
        self._available_now = False
        self._target: int | None = None
        self._latest: dict[str, str | int] | None = None
        self._exists = False  # whether the topic existed when last asked
        self._told_unknown = False  # logged that the checkpoint's log is not known
        self._groups: dict[str, int] = {}  # the topic's groups when last asked

    @property
    def topic(self) -> str:
        return self.options.queue.topic

    def initialOffset(self) -> dict[str, str | int]:  # noqa: N802
        """Where a new query starts (``startingOffsets``), with option ``group`` (nothing
        is made on the service: `latestOffset` makes the group with the first batch).

        Raises:
            QueueError: the topic does not exist (``TOPIC_NOT_EXIST``) and the query does not
                wait for it (``waitForTopic``).
        """
        offsets = self.calls.offsets()
        if offsets is None and not self.options.wait_for_topic:
            addr = ", ".join(self.options.queue.addresses)
            raise QueueError(addr, ResponseCode.TOPIC_NOT_EXIST,
                             f"topic {self.topic!r} does not exist: publish to it (or create "
                             "it) before the query starts, or set option waitForTopic=true "
                             "to wait for it")
        start = 0 if offsets is None else resolve_start(
            self.options.starting, offsets.earliest, offsets.end)
        incarnation = None if offsets is None else offsets.incarnation
        return StreamOffset(self.topic, start, self.options.group, incarnation).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        limit = self.options.max_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        """``Trigger.AvailableNow``: read what is readable when the query starts, then stop
        (the bound is taken at the first trigger, from where the query resumes)."""
        self._available_now = True

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit  # noqa: N802
                     ) -> dict[str, str | int]:
        """Return the end of the next trigger (``start`` itself: nothing to read); the
        query's group (if any) is made at ``start`` when the trigger reads something and the
        service has no such group (the query's first batch, or a service that lost it)."""
        begin = StreamOffset.from_json(start, self.topic)
        begin, readable = self._readable(begin.at(begin.offset))  # its reset was its batch's
        if self._available_now and self._target is None:
            self._target = readable
        if readable == begin.offset and not self._available_now and self._exists:
            # nothing new: hold a pull until a message arrives, then plan what there is
            try:
                self.calls.pull(begin.offset, 1, IDLE_WAIT, begin.incarnation)
            except QueueError:  # the topic went, shrank or restarted: asked again below
                pass
            begin, readable = self._readable(begin)
        max_messages = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = begin.at(trigger_end(begin.offset, readable, max_messages, self._target))
        if begin.reset is not None:  # the first batch of a new log starts at its start
            end = StreamOffset(end.topic, end.offset, end.group, end.incarnation, begin.reset)
        group = self.options.group or begin.group
        if group is not None and end.offset > begin.offset and group not in self._groups:
            self._commit(group, batch_start(begin, end))
        return end.to_json()

    def _readable(self, begin: StreamOffset) -> tuple[StreamOffset, int]:
        """Return where the next batch starts (``begin``, or the start of a new log the
        topic is now: with ``reset`` set) and how far it may read."""
        offsets = self.calls.offsets(begin.offset)
        self._exists = offsets is not None
        self._groups = {} if offsets is None else offsets.groups
        if offsets is None:  # no such topic (yet): nothing to read
            self._latest = begin.to_json()
            return begin, begin.offset
        if begin.incarnation is None and offsets.incarnation is not None:
            if not self._told_unknown:  # a checkpoint from before incarnations
                self._told_unknown = True
                log.warning("queue.incarnation_unknown", topic=self.topic,
                            offset=begin.offset, incarnation=offsets.incarnation)
            begin = begin.of(offsets.incarnation)
        elif (begin.incarnation is not None and offsets.incarnation is not None
                and offsets.incarnation != begin.incarnation):
            return self._new_log(begin, offsets.incarnation, offsets.earliest)
        self._latest = begin.at(offsets.end).to_json()
        if offsets.end < begin.offset:
            # the service lost the offsets up to where the query is: the messages published
            # next get offsets the query has passed already, and would be skipped
            if self.options.fail_on_data_loss:
                raise MessagesLostError(self.calls.options.addresses[0], self.topic,
                                        offsets.end, begin.offset)
            log.warning("queue.messages_lost", topic=self.topic, first=offsets.end,
                        end=begin.offset)
            return begin, begin.offset
        return begin, max(begin.offset, offsets.readable)

    def _new_log(self, begin: StreamOffset, incarnation: str, earliest: int
                 ) -> tuple[StreamOffset, int]:
        """The topic is another log than the one ``begin`` is an offset of: fail, or (with
        ``failOnDataLoss=false``) go on from the new log's start."""
        if self.options.fail_on_data_loss:
            assert begin.incarnation is not None
            raise MessagesLostError(self.calls.options.addresses[0], self.topic, begin.offset,
                                    begin.offset, (begin.incarnation, incarnation))
        log.warning("queue.messages_lost", topic=self.topic, first=begin.offset, end=None,
                    incarnation=incarnation, was=begin.incarnation)
        start = StreamOffset(self.topic, earliest, begin.group, incarnation, earliest)
        offsets = self.calls.offsets(earliest)
        readable = earliest if offsets is None else max(earliest, offsets.readable)
        self._latest = start.at(earliest if offsets is None else offsets.end).to_json()
        return start, readable

    def reportLatestOffset(self) -> dict[str, str | int] | None:  # noqa: N802
        """The topic's end when last asked (Spark's progress shows it as latestOffset)."""
        return self._latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[OffsetRange]:
        begin = StreamOffset.from_json(start, self.topic)
        until = StreamOffset.from_json(end, self.topic)
        return [OffsetRange(a, b, until.incarnation)
                for a, b in split_range(batch_start(begin, until), until.offset,
                                        self.options.per_partition)]

    def read(self, partition: object) -> Iterator[pa.RecordBatch]:
        return _read(self.calls, partition, self.options.fail_on_data_loss)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark has committed every offset before ``end``: commit it to the group, if any."""
        done = StreamOffset.from_json(end, self.topic)
        group = self.options.group or done.group
        if group is not None:
            self._commit(group, done.offset)

    def _commit(self, group: str, offset: int) -> None:
        try:
            self.calls.commit(group, offset)
        except RemotingError as exc:  # the next commit makes it good
            log.warning("queue.commit_failed", topic=self.topic, group=group, offset=offset,
                        error=type(exc).__name__, code=getattr(exc, "code", None))


class QueueBatchReader(DataSourceReader):
    """A batch read of an offset range: ``startingOffsets`` (default earliest) to
    ``endingOffsets`` (default latest), at most what a pull reads when the query is planned
    (a deferred message not yet due ends it)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.calls = QueueCalls(options.queue)

    def partitions(self) -> Sequence[OffsetRange]:
        offsets = self.calls.offsets(missing_ok=False)
        assert offsets is not None
        start = resolve_start(self.options.starting, offsets.earliest, offsets.end)
        from_start = self.calls.offsets(start, missing_ok=False)
        assert from_start is not None
        end = from_start.readable  # never past a deferred message not yet due
        if self.options.ending != "latest":
            end = min(end, resolve_start(self.options.ending, offsets.earliest, offsets.end))
        return [OffsetRange(a, b, offsets.incarnation)
                for a, b in split_range(start, end, self.options.per_partition)]

    def read(self, partition: object) -> Iterator[pa.RecordBatch]:
        return _read(self.calls, partition, self.options.fail_on_data_loss)
