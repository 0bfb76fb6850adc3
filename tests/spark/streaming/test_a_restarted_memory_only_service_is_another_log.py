"""The streaming source and a queue service without a data directory that restarted (its
planning called as Spark's driver calls it, and a task's read, against real services on
127.0.0.1, no SparkSession): the new service's log has another incarnation, so a query whose
checkpoint is at offset 50 of the old log fails with `MessagesLostError` instead of reading
the new log from 50 on (it skipped the new log's first 50 messages without a word); with
``failOnDataLoss=false`` it reads the new log from its start. A task planned on the old log
fails too. A checkpoint written before incarnations is read, and the source says once that it
cannot tell."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from codec import ResponseCode
from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.queue import QueueClient, QueueError, QueueService
from remoting.spark import MessagesLostError
from remoting.spark._streaming._options import source_options
from remoting.spark._streaming._source import OffsetRange, QueueStreamReader

from ...logs import capture_logs


@contextmanager
def memory_only_service(messages: int) -> Iterator[str]:
    """A queue service without a data directory whose topic ``t`` holds ``messages``."""
    server = RemotingServer(ServerConfig(listen_port=0))
    QueueService().attach(server)
    server.start()
    try:
        with RemotingClient() as client:
            QueueClient(client).publish_many(server.addr, "t", [b"%d" % i
                                                                for i in range(messages)])
        yield server.addr
    finally:
        server.shutdown()


def reader(addr: str, **options: str) -> QueueStreamReader:
    return QueueStreamReader(source_options({"addresses": addr, "topic": "t", **options},
                                            streaming=True))


def _checkpoint_at_50() -> dict[str, str | int]:
    """What a query checkpointed after reading 50 messages of a service that then stopped."""
    with memory_only_service(50) as old:
        source = reader(old, startingOffsets="earliest")
        end = source.latestOffset(source.initialOffset(), ReadAllAvailable())
    assert end["offset"] == 50 and isinstance(end["incarnation"], str)
    return end


def test_a_query_on_a_restarted_memory_only_service_fails_loudly() -> None:
    checkpoint = _checkpoint_at_50()
    with memory_only_service(60) as new:  # "restarted": a new log, already past 50
        source = reader(new)
        with pytest.raises(MessagesLostError, match="is another log now") as lost:
            source.latestOffset(checkpoint, ReadAllAvailable())
        assert lost.value.incarnations is not None
        assert lost.value.incarnations[0] == checkpoint["incarnation"]
        assert lost.value.first == 50
        # a task planned on the old log, read on the new one, fails as loudly
        with pytest.raises(MessagesLostError) as task:
            list(source.read(OffsetRange(0, 10, str(checkpoint["incarnation"]))))
        assert isinstance(task.value.__cause__, QueueError)
        assert task.value.__cause__.code == ResponseCode.PULL_OFFSET_MOVED


def test_without_fail_on_data_loss_the_query_reads_the_new_log_from_its_start() -> None:
    checkpoint = _checkpoint_at_50()
    with memory_only_service(60) as new:
        source = reader(new, failOnDataLoss="false")
        with capture_logs() as events:
            end = source.latestOffset(checkpoint, ReadAllAvailable())
        [lost] = [e for e in events if e["event"] == "queue.messages_lost"]
        assert lost["first"] == 50 and lost["incarnation"] == end["incarnation"]
        assert end["incarnation"] != checkpoint["incarnation"] and end["offset"] == 60
        ranges = source.partitions(checkpoint, end)
        assert [(r.start, r.end) for r in ranges] == [(0, 60)]  # not (50, 60)
        read = [o for r in ranges for b in source.read(r) for o in b.column("offset").to_pylist()]
        assert read == list(range(60))
        after = source.latestOffset(end, ReadAllAvailable())  # the next batch: as usual
        assert after["offset"] == 60 and "reset" not in after


def test_a_checkpoint_from_before_incarnations_is_read_and_said_unknown() -> None:
    with memory_only_service(20) as addr:
        source = reader(addr)
        old_style = {"topic": "t", "offset": 5, "group": "spark-old"}
        with capture_logs() as events:
            end = source.latestOffset(old_style, ReadAllAvailable())
            source.latestOffset(end, ReadAllAvailable())
        assert end["offset"] == 20 and isinstance(end["incarnation"], str)
        assert [e["event"] for e in events].count("queue.incarnation_unknown") == 1
        assert [(r.start, r.end) for r in source.partitions(old_style, end)] == [(5, 20)]
