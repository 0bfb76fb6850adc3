"""The streaming sink publishes a micro-batch that Spark runs again (the query restarted from
a checkpoint whose last batch was not committed) nothing twice: its chunks carry the same
idempotence keys, which the queue service de-duplicates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Progress, Queue

pytestmark = pytest.mark.spark

MESSAGES = 3_000


def upper_to_out(streaming: Any, queue: Queue, checkpoint: Path) -> Any:
    return (streaming.readStream.format("remoting").option("addresses", queue.addr)
            .option("topic", "in").option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", "1000").load()
            .selectExpr("upper(CAST(body AS STRING)) AS body", "headers")
            .writeStream.format("remoting").option("addresses", queue.addr)
            .option("topic", "out").option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def read_topic(queue: Queue, topic: str) -> list[bytes]:
    bodies: list[bytes] = []
    while True:
        page = queue.q.pull(queue.addr, topic, offset=len(bodies), max_messages=4096,
                            max_wait=0)
        if not page:
            return bodies
        bodies += [m.body for m in page]


def test_a_batch_run_again_publishes_nothing_twice(
        streaming: Any, progress: Progress, queue: Queue, tmp_path: Path) -> None:
    queue.q.publish_many(queue.addr, "in", [(b"m%d" % i, {"n": str(i)})
                                            for i in range(MESSAGES)])
    checkpoint = tmp_path / "checkpoint"
    first = upper_to_out(streaming, queue, checkpoint)
    assert first.awaitTermination(240) and first.exception() is None
    assert queue.q.offsets(queue.addr, "out").end == MESSAGES

    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):  # as if the query died before committing it
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    again = upper_to_out(streaming, queue, checkpoint)
    assert again.awaitTermination(240) and again.exception() is None

    rerun = [p for p in again.recentProgress if p["numInputRows"]]
    assert [p["batchId"] for p in rerun] == [last]  # Spark ran that batch again
    stats = queue.q.statistics(queue.addr, "out").topics["out"]
    assert stats.end == MESSAGES and stats.duplicates >= 1
    published = read_topic(queue, "out")
    assert sorted(published) == sorted(b"M%d" % i for i in range(MESSAGES))
    headers = {m.body: m.headers for m in queue.q.pull(queue.addr, "out", offset=0,
                                                       max_messages=10, max_wait=0)}
    assert all(h == {"n": body[1:].decode()} for body, h in headers.items())
