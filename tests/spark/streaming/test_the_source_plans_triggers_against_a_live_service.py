"""The streaming source's planning, called as Spark's driver calls it, against a real queue
service on 127.0.0.1 (no SparkSession): where a query starts and the group it pins, how far
each trigger reads (``maxMessagesPerTrigger``, ``Trigger.AvailableNow``, a deferred message),
the pull it holds while nothing is new, and the commits that move its group."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.queue import BlockingQueueClient, QueueClient, QueueService
from remoting.spark._streaming._options import source_options
from remoting.spark._streaming._source import OffsetRange, QueueStreamReader

if TYPE_CHECKING:
    from remoting.queue._messages import PulledRecords


@pytest.fixture
def served() -> Iterator[tuple[str, BlockingQueueClient]]:
    service = QueueService()
    server = RemotingServer(ServerConfig(listen_port=0))
    service.attach(server)
    server.start()
    client = RemotingClient().start()
    try:
        yield server.addr, QueueClient(client)
    finally:
        client.shutdown()
        server.shutdown()


def reader(addr: str, **options: str) -> QueueStreamReader:
    return QueueStreamReader(source_options({"addresses": addr, "topic": "t", **options},
                                            streaming=True))


def test_a_new_query_starts_where_asked_and_pins_a_named_group_there(
        served: tuple[str, BlockingQueueClient]) -> None:
    addr, q = served
    q.publish_many(addr, "t", [b"x"] * 10)
    sources = [reader(addr, startingOffsets="earliest"), reader(addr),
               reader(addr, startingOffsets="4", group="reports"),
               reader(addr, startingOffsets="latest", group="idle")]

    earliest, latest, named, idle = [s.initialOffset() for s in sources]
    again = [s.initialOffset() for s in sources]  # Spark asks twice: nothing made

    assert [o["offset"] for o in (earliest, latest, named, idle)] == [0, 10, 4, 10]
    assert "group" not in earliest and named["group"] == "reports"
    assert q.offsets(addr, "t").groups == {}
    # the first batch planned makes a named group at its start; nothing to read makes none
    ends = [s.latestOffset(start, ReadMaxRows(3))
            for s, start in zip(sources, again, strict=True)]
    assert [end["offset"] for end in ends] == [3, 10, 7, 10]
    assert q.offsets(addr, "t").groups == {"reports": 4}
    for s, start in zip(sources, again, strict=True):  # planned again (a restart): no more
        s.latestOffset(start, ReadMaxRows(3))
    assert q.offsets(addr, "t").groups == {"reports": 4}


def test_a_trigger_reads_at_most_max_messages_and_stops_at_a_deferred_one(
        served: tuple[str, BlockingQueueClient]) -> None:
    addr, q = served
    q.publish_many(addr, "t", [b"x"] * 25)
    q.publish(addr, "t", b"later", defer=600.0)
    q.publish(addr, "t", b"after")
    source = reader(addr, startingOffsets="earliest", maxMessagesPerTrigger="10",
                    messagesPerPartition="4")
    start = source.initialOffset()

    assert source.getDefaultReadLimit() == ReadMaxRows(10)
    ends = []
    for _ in range(4):
        end = source.latestOffset(start, ReadMaxRows(10))
        ends.append(end["offset"])
        start = end
    assert ends == [10, 20, 25, 25]  # held back by the deferred message at 25
    assert source.latestOffset({**start, "offset": 0}, ReadAllAvailable())["offset"] == 25
    assert [(p.start, p.end) for p in source.partitions({**start, "offset": 10}, start)] == [
        (10, 13), (13, 17), (17, 21), (21, 25)]
    latest = source.reportLatestOffset()
    assert latest is not None and latest["offset"] == 27  # the topic's end, for the progress


def test_available_now_reads_what_was_there_at_the_first_trigger_then_stops(
        served: tuple[str, BlockingQueueClient]) -> None:
    addr, q = served
    q.publish_many(addr, "t", [b"x"] * 15)
    source = reader(addr, startingOffsets="earliest", maxMessagesPerTrigger="10")
    source.prepareForTriggerAvailableNow()
    start = source.initialOffset()

    first = source.latestOffset(start, ReadMaxRows(10))
    q.publish_many(addr, "t", [b"late"] * 5)  # after the query started: not for this run
    second = source.latestOffset(first, ReadMaxRows(10))
    held: list[tuple[object, ...]] = []  # the pulls the source holds on the service
    pull = source.calls.pull

    def spy(*args: Any) -> PulledRecords:
        held.append(args)
        return pull(*args)

    source.calls.pull = spy  # type: ignore[assignment,method-assign]  # a spy on purpose
    third = source.latestOffset(second, ReadMaxRows(10))

    assert [first["offset"], second["offset"], third["offset"]] == [10, 15, 15]
    assert held == []  # its end is no reason to hold a pull


def test_with_nothing_new_the_driver_holds_a_pull_that_a_publish_answers(
        served: tuple[str, BlockingQueueClient]) -> None:
    addr, q = served
    q.publish_many(addr, "t", [b"x"] * 3)
    source = reader(addr)
    start = source.initialOffset()
    assert source.latestOffset(start, ReadAllAvailable()) == start  # held, then nothing

    def publish_once_held() -> None:
        deadline = time.monotonic() + 10
        while q.statistics(addr).held_pulls == 0 and time.monotonic() < deadline:
            pass  # the hold is the service's to report: ask until it does
        q.publish(addr, "t", b"new")

    publisher = threading.Thread(target=publish_once_held)
    publisher.start()
    end = source.latestOffset(start, ReadAllAvailable())
    publisher.join(10)
    assert end["offset"] == 4


def test_spark_commits_move_the_group_and_another_topics_checkpoint_is_refused(
        served: tuple[str, BlockingQueueClient]) -> None:
    addr, q = served
    q.publish_many(addr, "t", [b"x"] * 8)
    source = reader(addr, startingOffsets="earliest", group="reports")
    start = source.initialOffset()

    source.commit({**start, "offset": 6})
    reader(addr).commit({"topic": "t", "offset": 5, "group": "spark-old"})  # an old checkpoint

    assert q.offsets(addr, "t").groups == {"reports": 6, "spark-old": 5}
    assert q.statistics(addr, "t").topics["t"].groups["reports"].lag == 2
    with pytest.raises(ValueError, match="reading topic 'other'"):
        source.latestOffset({**start, "topic": "other"}, ReadAllAvailable())
    assert list(source.read(OffsetRange(2, 5)))[0].column("offset").to_pylist() == [2, 3, 4]
