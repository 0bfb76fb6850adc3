"""A streaming query of the ``remoting`` source makes one consumer group on the queue
service, once, when its first batch is planned: not one per call of Spark's
``initialOffset`` (PySpark asks twice as a query starts, and each answer used to make a group,
one of which stayed at its start forever, holding the topic's retention), none for a query
that read nothing, and none when a query restarts from its checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conftest import Queue


def run(streaming: Any, queue: Queue, checkpoint: Path, topic: str = "clicks") -> None:
    stream = (streaming.readStream.format("remoting").option("addresses", queue.addr)
              .option("topic", topic).option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", "40").load())
    query = (stream.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None


def groups(queue: Queue, topic: str = "clicks") -> dict[str, int]:
    return {name: offset for name, offset in queue.q.offsets(queue.addr, topic).groups.items()
            if name.startswith("spark-")}


def test_starts_restarts_and_several_queries_make_one_group_each(
        streaming: Any, queue: Queue, tmp_path: Path) -> None:
    queue.q.publish_many(queue.addr, "clicks", [b"x"] * 100)

    run(streaming, queue, tmp_path / "a")
    after_first = groups(queue)
    run(streaming, queue, tmp_path / "b")
    run(streaming, queue, tmp_path / "c")
    after_three = groups(queue)
    queue.q.publish_many(queue.addr, "clicks", [b"y"] * 100)
    run(streaming, queue, tmp_path / "a")  # restarted from its checkpoint, with new messages
    run(streaming, queue, tmp_path / "b")
    run(streaming, queue, tmp_path / "b")  # and again, with nothing new for it
    after_restarts = groups(queue)

    assert len(after_first) == 1
    assert len(after_three) == 3
    assert after_restarts.keys() == after_three.keys()
    # each query's one group is the one that moves: Spark commits a batch to the source when
    # it plans the next one, so after three triggers of 40 the group is past the first two
    first = next(iter(after_first))
    assert after_first[first] >= 40
    assert after_restarts[first] > after_first[first]


def test_a_query_that_reads_nothing_makes_no_group(
        streaming: Any, queue: Queue, tmp_path: Path) -> None:
    queue.q.publish_many(queue.addr, "quiet", [b"x"] * 5)
    stream = (streaming.readStream.format("remoting").option("addresses", queue.addr)
              .option("topic", "quiet").option("startingOffsets", "latest").load())
    query = (stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path))
             .trigger(availableNow=True).start())
    query.awaitTermination()

    assert query.exception() is None
    assert groups(queue, "quiet") == {}
