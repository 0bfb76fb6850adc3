"""The queue service (a process of its own, with a data directory) is SIGKILLed while a
streaming query reads it, and started again on the same port and directory: the query waits
for it (its calls retry for ``reconnectTimeout``), goes on, and the Parquet output has every
message exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from remoting import RemotingClient
from remoting.queue import QueueClient
from tests.queue.service_process import QueueProcess

from .conftest import Progress

pytestmark = pytest.mark.spark

BEFORE = 10_000
AFTER = 10_000


def test_the_output_has_every_message_once_across_a_service_restart(
        streaming: Any, progress: Progress, tmp_path: Path) -> None:
    data = tmp_path / "queue"
    service = QueueProcess("--data-dir", str(data))
    addr = service.addr
    client = RemotingClient().start()
    q = QueueClient(client)
    query = None
    try:
        q.publish_many(addr, "events", [b"%d" % i for i in range(BEFORE)], key="first")
        query = (streaming.readStream.format("remoting").option("addresses", addr)
                 .option("topic", "events").option("startingOffsets", "earliest")
                 .option("maxMessagesPerTrigger", "2000").load()
                 .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
        progress.wait_for(query, batches=2)
        service.kill()  # mid-stream: the query's next calls find nobody there
        read_before_the_kill = sum(p["numInputRows"] for p in progress.of(query))

        service = QueueProcess("--data-dir", str(data), "--port", addr.rsplit(":", 1)[1])
        q.publish_many(addr, "events", [b"%d" % i for i in range(BEFORE, BEFORE + AFTER)],
                       key="second")
        query.processAllAvailable()
        assert query.isActive and query.exception() is None
    finally:
        if query is not None:
            query.stop()
        client.shutdown()
        service.stop()

    assert read_before_the_kill < BEFORE  # the service went away with messages left to read
    out = streaming.read.parquet(str(tmp_path / "out"))
    rows = out.selectExpr("count(*) AS n", "count(DISTINCT offset) AS distinct_offsets",
                          "max(offset) AS high",
                          "sum(CAST(CAST(body AS STRING) AS LONG) - offset) AS off").first()
    assert (rows.n, rows.distinct_offsets, rows.high, rows.off) == (
        BEFORE + AFTER, BEFORE + AFTER, BEFORE + AFTER - 1, 0)
