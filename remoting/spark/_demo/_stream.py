"""The streaming demo behind ``remoting demo --stream``.

It starts a queue service and the feature-store service (`_feature_store`) on 127.0.0.1, and
a producer thread that publishes ``rows`` JSON messages (a user id each) to a topic in keyed
batches. A Structured Streaming query reads the topic with the ``remoting`` source
(``maxMessagesPerTrigger``), decodes the bodies, scores each micro-batch through the
service (`remote_map_in_arrow`: one request per Arrow batch) and writes Parquet. A listener
prints a line per trigger (rows, rows/s, the topic's lag behind the trigger); once ``rows``
messages are through, the query stops, every score is checked against the local computation,
a summary is printed, and everything stops. Exit 0 when every message is in the output once
with its right score.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..._config import ServerConfig
from ...blocking import RemotingClient, RemotingServer
from ...queue import QueueClient, QueueService
from .._batch_udf import remote_map_in_arrow
from .._streaming import decode_bodies, register_data_source
from ._feature_store import SCORE_BATCH, FeatureTable, register
from ._job import _mismatches, _on_a_terminal, _spark, java_missing

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["run_stream_demo"]

TOPIC = "demo-events"
PUBLISH_BATCH = 2_000  # messages per publish of the producer
STOP_SECONDS = 600.0  # the query is stopped past this even if rows are missing


class _Producer(threading.Thread):
    """Publishes ``rows`` messages ``{"id": i, "user_id": u}`` in keyed batches."""

    def __init__(self, addr: str, rows: int, users: int) -> None:
        super().__init__(name="demo-producer", daemon=True)
        self.addr = addr
        self.rows = rows
        self.users = users
        self.error: BaseException | None = None

    def run(self) -> None:
        client = RemotingClient().start()
        try:
            q = QueueClient(client)
            for start in range(0, self.rows, PUBLISH_BATCH):
                bodies = [json.dumps({"id": i, "user_id": i * 7919 % self.users}).encode()
                          for i in range(start, min(self.rows, start + PUBLISH_BATCH))]
                q.publish_many(self.addr, TOPIC, bodies, key=f"demo/{start}")
        except BaseException as exc:  # reported by the demo, which then fails
            self.error = exc
        finally:
            client.shutdown()


def _listener(rows: int, out: IO[str], done: threading.Event, seen: list[dict[str, Any]]
              ) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (pyspark's)
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            progress = json.loads(event.progress.json)
            if not progress["numInputRows"]:
                return
            seen.append(progress)
            source = progress["sources"][0]
            lag = source["latestOffset"]["offset"] - source["endOffset"]["offset"]
            total = sum(p["numInputRows"] for p in seen)
            print(f"trigger {progress['batchId']:>4} {progress['numInputRows']:>9,} rows "
                  f"{progress.get('processedRowsPerSecond', 0.0):>11,.0f} rows/s "
                  f"lag {lag:>9,}   total {total:>11,}", file=out, flush=True)
            if total >= rows:
                done.set()

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            done.set()

    return Progress()


def _check(spark: SparkSession, path: Path, rows: int, table: FeatureTable
           ) -> tuple[int, int, int]:
    """Return (rows, distinct offsets, wrong scores) of the Parquet output."""
    df = spark.read.parquet(str(path))
    counts = df.selectExpr("count(*) AS n", "count(DISTINCT offset) AS offsets").first()
    assert counts is not None
    return int(counts.n), int(counts.offsets), _mismatches(spark, path, "score", table)


def run_stream_demo(rows: int = 200_000, output: Path = Path("output"),
                    partitions: int | None = None, out: IO[str] = sys.stdout,
                    master: str = "local[*]") -> int:
    """Run the streaming demo; return the exit code (0: every message scored once, right)."""
    if java_missing():
        return 2
    cores = os.cpu_count() or 2
    partitions = partitions or 2 * cores
    per_trigger = max(1_000, rows // 10)
    target = output.resolve() / "demo-stream"
    shutil.rmtree(target, ignore_errors=True)  # a new query: no checkpoint of an old one
    table = FeatureTable()
    scoring = RemotingServer(ServerConfig(listen_port=0))
    register(scoring, table)
    scoring.start()
    queue = QueueService(memory_messages=rows + PUBLISH_BATCH)
    queue_server = RemotingServer(ServerConfig(listen_port=0))
    queue.attach(queue_server)
    queue_server.start()
    spark = None
    try:
        print(f"demo --stream: queue service on {queue_server.addr}, feature-store service on "
              f"{scoring.addr}; Spark {master}, {rows:,} messages, at most {per_trigger:,} "
              f"per trigger -> {target}", file=out, flush=True)
        spark = _spark(partitions, master, progress_bar=_on_a_terminal(out))
        spark.conf.set("spark.sql.adaptive.enabled", "false")  # a stream has no use for it
        register_data_source(spark)
        with RemotingClient() as client:
            QueueClient(client).create_topic(queue_server.addr, TOPIC)
        producer = _Producer(queue_server.addr, rows, len(table))
        events = (spark.readStream.format("remoting")
                  .option("addresses", queue_server.addr).option("topic", TOPIC)
                  .option("startingOffsets", "earliest")
                  .option("maxMessagesPerTrigger", str(per_trigger))
                  .option("messagesPerPartition", str(max(1, per_trigger // partitions)))
                  .load())
        decoded = decode_bodies(events, "id long, user_id long").select("offset", "id",
                                                                       "user_id")
        scored = remote_map_in_arrow(decoded, scoring.addr, SCORE_BATCH,
                                     "offset long, id long, user_id long, score double")
        done = threading.Event()
        seen: list[dict[str, Any]] = []
        listener = _listener(rows, out, done, seen)
        spark.streams.addListener(listener)
        started = time.perf_counter()
        query = (scored.writeStream.format("parquet").option("path", str(target / "scores"))
                 .option("checkpointLocation", str(target / "checkpoint")).start())
        producer.start()
        done.wait(STOP_SECONDS)
        seconds = time.perf_counter() - started
        failure = query.exception()
        query.stop()
        spark.streams.removeListener(listener)
        producer.join(60)
        if failure is not None or producer.error is not None:
            print(f"the demo failed: {failure or producer.error}", file=sys.stderr)
            return 1
        written, offsets, wrong = _check(spark, target / "scores", rows, table)
        print(f"\n{written:,} rows in {len(seen)} triggers, {seconds:.1f} s "
              f"({written / seconds:,.0f} rows/s end to end, from the first publish to the "
              f"last trigger); {offsets:,} distinct offsets; wrong scores: {wrong:,}",
              file=out)
        print(f"Parquet: {target / 'scores'}", file=out)
        return 0 if written == offsets == rows and wrong == 0 else 1
    finally:
        if spark is not None:
            spark.stop()
        queue_server.shutdown()
        scoring.shutdown()
