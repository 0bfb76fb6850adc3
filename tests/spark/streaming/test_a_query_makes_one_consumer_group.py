"""Consumer groups a streaming query of the ``remoting`` source leaves on the queue service,
counted after starts, restarts and several queries: none by default (the offsets are in the
checkpoint: a query neither holds the topic nor lets it trim what a later query from
``earliest`` reads), and with option ``group`` that one group, made once, when the first
batch is planned: never per call of Spark's ``initialOffset``, which PySpark makes twice as a
query starts (each call used to make a group, one of which stayed at the start for good)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conftest import Queue


def run(streaming: Any, queue: Queue, checkpoint: Path, topic: str = "clicks",
        **options: str) -> int:
    """Run an AvailableNow query of ``topic`` from its earliest offset; return its rows."""
    reader = (streaming.readStream.format("remoting").option("addresses", queue.addr)
              .option("topic", topic).option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", "40"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    return sum(p["numInputRows"] for p in query.recentProgress)


def groups(queue: Queue, topic: str = "clicks") -> dict[str, int]:
    return queue.q.offsets(queue.addr, topic).groups


def test_queries_make_no_group_and_each_reads_the_whole_topic(
        streaming: Any, queue: Queue, tmp_path: Path) -> None:
    queue.q.publish_many(queue.addr, "clicks", [b"x"] * 100)

    rows = [run(streaming, queue, tmp_path / name) for name in "abc"]
    queue.q.publish_many(queue.addr, "clicks", [b"y"] * 100)
    rows += [run(streaming, queue, tmp_path / "a"), run(streaming, queue, tmp_path / "d")]

    assert groups(queue) == {}
    # no query's progress let the topic go: the third and the last start from offset 0 too
    assert rows == [100, 100, 100, 100, 200]
    assert queue.q.offsets(queue.addr, "clicks").earliest == 0


def test_a_named_group_is_made_once_and_follows_its_query(
        streaming: Any, queue: Queue, tmp_path: Path) -> None:
    queue.q.publish_many(queue.addr, "clicks", [b"x"] * 100)
    queue.q.publish_many(queue.addr, "quiet", [b"x"] * 5)

    run(streaming, queue, tmp_path / "a", group="reports")
    after_first = groups(queue)
    queue.q.publish_many(queue.addr, "clicks", [b"y"] * 100)
    run(streaming, queue, tmp_path / "a", group="reports")  # restarted, with new messages
    run(streaming, queue, tmp_path / "a", group="reports")  # and with nothing new
    after_restarts = groups(queue)
    # a query from the end reads nothing: its group is not made
    (streaming.readStream.format("remoting").option("addresses", queue.addr)
     .option("topic", "quiet").option("group", "idle").load()
     .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "q"))
     .trigger(availableNow=True).start().awaitTermination())

    assert after_first.keys() == after_restarts.keys() == {"reports"}
    # Spark commits a batch to the source when it plans the next one: after three triggers
    # of 40 the group is past the first two, and it moves on with the restarts
    assert 40 <= after_first["reports"] <= 100
    assert 100 < after_restarts["reports"] <= 200
    assert groups(queue, "quiet") == {}
