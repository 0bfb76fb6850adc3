"""The ``rocketmq`` data source: topics of a RocketMQ cluster read by a Structured Streaming
query (``spark.readStream.format("rocketmq")``) or a batch read of offset ranges
(``spark.read.format("rocketmq")``), and written by a stream or a batch
(``df.writeStream.format("rocketmq")``, ``df.write``: `_sink`).

Theory of operation (Spark's Kafka source, over RocketMQ's queues):
- The stream's offset is each message queue's next offset (`_offsets`), kept by Spark in its
  checkpoint. Each trigger the driver looks the topics' routes up (a queue added since is read
  from offset 0) and asks every broker its queues' ends (one round trip per broker), then
  plans the trigger's ranges (`trigger_ends`: ``maxMessagesPerTrigger``,
  ``Trigger.AvailableNow``) and cuts them into partitions (`plan_partitions`). Executors
  pull their ranges from the brokers with explicit offsets (`_reading`), committing nothing:
  a range reads the same messages whenever it is read again, so a query restarted from its
  checkpoint neither loses nor repeats a message in a sink that keeps batch ids.
- Data loss, as the Kafka source reports it: offsets below a queue's first one (found by the
  executors' pulls) and a queue whose end went back below the query's offset (found when
  planning: the queue was made afresh) fail the query (`RocketMQMessagesLostError`), or with
  ``failOnDataLoss=false`` are skipped, logged; a queue made afresh is then read from 0.
- With option ``group``, once Spark has committed a batch its end is committed to that
  consumer group on the brokers, so RocketMQ's tools (``mqadmin consumerProgress``, ``remoting
  rocketmq offsets``) show the query's lag. Without it nothing is committed anywhere.

The reader objects are pickled to the executors with their options only.
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

from ..._fleet import log
from ._cluster import Cluster, TopicMissingError
from ._offsets import (
    Segment,
    offsets_from_json,
    offsets_json,
    plan_partitions,
    resolve,
    trigger_ends,
)
from ._options import SourceOptions, check_options, sink_options, source_options
from ._reading import RocketMQMessagesLostError, read_segments, spark_schema

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ._offsets import QueueKey
    from ._sink import RocketMQBatchWriter, RocketMQStreamWriter

__all__ = ["NAME", "RocketMQBatchReader", "RocketMQDataSource", "RocketMQPartition",
           "RocketMQStreamReader"]

NAME: Final = "rocketmq"


class RocketMQPartition(InputPartition):
    """One task's queue ranges, and the address of each broker they are on."""

    def __init__(self, segments: list[Segment], addresses: dict[str, str]) -> None:
        self.segments = segments
        self.addresses = addresses


class RocketMQDataSource(DataSource):
    """The ``rocketmq`` format (options: docs/spark.md, "RocketMQ").

    Spark makes it when a read is loaded (``load()``) or a write starts: its options are
    checked then, named as documented.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        check_options(self.options)

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        """``body binary, topic string, broker_name string, queue_id int, queue_offset long,
        msg_id string, tags string, keys array<string>, properties map<string,string>,
        born_timestamp timestamp, store_timestamp timestamp``."""
        return spark_schema()

    def reader(self, schema: StructType) -> RocketMQBatchReader:
        return RocketMQBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> RocketMQStreamReader:  # noqa: N802 (pyspark's)
        return RocketMQStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQBatchWriter:
        from ._sink import RocketMQBatchWriter

        return RocketMQBatchWriter(sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool  # noqa: N802
                     ) -> RocketMQStreamWriter:
        from ._sink import RocketMQStreamWriter

        return RocketMQStreamWriter(sink_options(self.options), schema)


def _partitions(options: SourceOptions, segments: list[Segment],
                queues: Mapping[QueueKey, str]) -> list[RocketMQPartition]:
    addresses = {broker: addr for (_, broker, _), addr in queues.items()}
    return [RocketMQPartition(part, {s.broker: addresses[s.broker] for s in part
                                     if s.broker in addresses})
            for part in plan_partitions(segments, options.min_partitions,
                                        options.per_partition)]


def _read(cluster: Cluster, options: SourceOptions, partition: object
          ) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RocketMQPartition):  # Spark's one empty partition
        return iter(())
    return read_segments(cluster, options, partition.segments, partition.addresses)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source (see the module docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.cluster = Cluster(options.cluster)
        self._available_now = False
        self._target: dict[QueueKey, int] | None = None
        self._latest: dict[str, Any] | None = None
        self._initial: dict[str, Any] | None = None  # a new query's start, made once
        self._queues: dict[QueueKey, str] = {}

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802
        """Where a new query starts (``startingOffsets``), found once (Spark asks twice).

        Raises:
            TopicRouteError: a topic does not exist (the message says which), or no name
                server answered; RemotingError, MQBrokerError: a broker did not answer.
        """
        if self._initial is None:
            self._queues = self.cluster.queues(self.options.topics)
            latest = self.cluster.bounds(self._queues, strict=True)
            earliest = ({} if self.options.starting == "latest"
                        else self.cluster.bounds(self._queues, earliest=True, strict=True))
            self._initial = offsets_json(resolve(self.options.starting, earliest, latest,
                                                 "earliest"))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        limit = self.options.max_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        """``Trigger.AvailableNow``: read to the queues' ends at the first trigger, then stop."""
        self._available_now = True

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit  # noqa: N802
                     ) -> dict[str, Any]:
        """Return the end of the next trigger (``start`` itself: nothing to read).

        Raises:
            RocketMQMessagesLostError: a queue's end is below the query's offset (the queue
                was made afresh) and ``failOnDataLoss`` is true.
        """
        begin = offsets_from_json(start, self.options.topics)
        latest = self._ends()
        if self._available_now and self._target is None:
            self._target = dict(latest)
        reset = {key: offset for key, offset in begin.items()
                 if key in latest and latest[key] < offset}
        for key, offset in reset.items():
            self._reset(key, latest[key], offset)
        max_messages = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        ends = trigger_ends({**begin, **dict.fromkeys(reset, 0)}, latest, max_messages,
                            self._target)
        self._latest = offsets_json({**begin, **latest})
        return offsets_json(ends)

    def _ends(self) -> dict[QueueKey, int]:
        """Return the queues' ends now (a queue of a broker that did not answer, or of a
        topic gone, is left out: it keeps its offset)."""
        try:
            self._queues = self.cluster.queues(self.options.topics)
        except TopicMissingError as exc:
            log.warning("rocketmq.topic_missing", topic=exc.topic)
            return {}
        return self.cluster.bounds(self._queues)

    def _reset(self, key: QueueKey, end: int, offset: int) -> None:
        topic, broker, queue_id = key
        addr = self._queues.get(key)
        why = (f"the queue's end, {end}, is below the query's offset: the queue was made "
               "afresh")
        if self.options.fail_on_data_loss:
            raise RocketMQMessagesLostError(addr, topic, broker, queue_id, end, offset, why)
        log.warning("rocketmq.messages_lost", topic=topic, broker=broker, queue=queue_id,
                    first=end, end=offset, why=why)

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802
        """The queues' ends when last asked (Spark's progress shows them as latestOffset)."""
        return self._latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]
                   ) -> Sequence[RocketMQPartition]:
        begin = offsets_from_json(start, self.options.topics)
        until = offsets_from_json(end, self.options.topics)
        segments = []
        for key, stop in until.items():
            first = begin.get(key, 0)
            if stop < first:  # the queue was made afresh (latestOffset said so): from 0
                first = 0
            segments.append(Segment(*key, first, stop))
        if any(s.broker not in {b for _, b, _ in self._queues} for s in segments
               if s.size > 0):
            self._queues = self.cluster.queues(self.options.topics)  # a restart replays
        return _partitions(self.options, segments, self._queues)

    def read(self, partition: object) -> Iterator[pa.RecordBatch]:
        return _read(self.cluster, self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark has committed every offset before ``end``: commit them to the group."""
        if self.options.group is None:
            return
        offsets = offsets_from_json(end, self.options.topics)
        if not self._queues or any(k not in self._queues for k in offsets):
            try:
                self._queues = self.cluster.queues(self.options.topics)
            except TopicMissingError:
                return
        self.cluster.commit(self.options.group, offsets, self._queues)


class RocketMQBatchReader(DataSourceReader):
    """A batch read of offset ranges: ``startingOffsets`` (default earliest) to
    ``endingOffsets`` (default latest) of every queue, as they are when the read is
    planned."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.cluster = Cluster(options.cluster)

    def partitions(self) -> Sequence[RocketMQPartition]:
        queues = self.cluster.queues(self.options.topics)
        latest = self.cluster.bounds(queues, strict=True)
        earliest = self.cluster.bounds(queues, earliest=True, strict=True)
        first = resolve(self.options.starting, earliest, latest, "earliest")
        last = resolve(self.options.ending, earliest, latest, "latest")
        segments = [Segment(*key, first[key], last[key]) for key in sorted(last)]
        return _partitions(self.options, segments, queues)

    def read(self, partition: object) -> Iterator[pa.RecordBatch]:
        return _read(self.cluster, self.options, partition)
