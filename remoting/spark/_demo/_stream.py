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

With ``source="rocketmq"`` (``--source rocketmq``) the messages go instead to a new topic of
a RocketMQ cluster whose name servers are given (``--name-servers``, else ``NAMESRV_ADDR``,
else ``127.0.0.1:9876``, where ../shared/rocketmq-broker/start.sh puts one; the broker must
create topics on first send, ``autoCreateTopicEnable=true``), and the query reads them with
the ``rocketmq`` source: every (queue, offset) must be in the output once.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
import uuid
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
SEND_BATCH = 500  # messages per SEND_BATCH_MESSAGE to RocketMQ
STOP_SECONDS = 600.0  # the query is stopped past this even if rows are missing
DEFAULT_NAME_SERVERS = "127.0.0.1:9876"  # where ../shared/rocketmq-broker/start.sh puts one


def _bodies(start: int, end: int, users: int) -> list[bytes]:
    return [json.dumps({"id": i, "user_id": i * 7919 % users}).encode()
            for i in range(start, end)]


def _send_rocketmq(name_servers: str, topic: str, start: int, end: int, users: int) -> None:
    """Send messages ``start`` to ``end - 1`` to ``topic`` in batches."""
    from ...rocketmq import Outgoing, Producer

    with Producer(name_servers, "demo-producer") as producer:
        for first in range(start, end, SEND_BATCH):
            producer.send_batch(topic, [Outgoing(body) for body in
                                        _bodies(first, min(end, first + SEND_BATCH), users)])


class _Producer(threading.Thread):
    """Publishes ``rows`` messages ``{"id": i, "user_id": u}`` in keyed batches."""

    def __init__(self, addr: str, rows: int, users: int, *, topic: str = TOPIC,
                 rocketmq: bool = False, first: int = 0) -> None:
        super().__init__(name="demo-producer", daemon=True)
        self.addr = addr  # the queue service's, or RocketMQ's name servers
        self.rows = rows
        self.users = users
        self.topic = topic
        self.rocketmq = rocketmq
        self.first = first  # messages sent before the query started
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if self.rocketmq:
                _send_rocketmq(self.addr, self.topic, self.first, self.rows, self.users)
            else:
                self._publish()
        except BaseException as exc:  # reported by the demo, which then fails
            self.error = exc

    def _publish(self) -> None:
        with RemotingClient() as client:
            q = QueueClient(client)
            for start in range(self.first, self.rows, PUBLISH_BATCH):
                q.publish_many(self.addr, self.topic,
                               _bodies(start, min(self.rows, start + PUBLISH_BATCH),
                                       self.users), key=f"demo/{start}")


def _lag(source: dict[str, Any]) -> int:
    """Messages the source had that the trigger did not read: the queue service's offsets
    are one number, RocketMQ's one per topic, broker and queue."""
    latest, end = source["latestOffset"], source["endOffset"]
    if "offset" in latest:
        return int(latest["offset"]) - int(end["offset"])
    return sum(int(offset) - int(end.get(topic, {}).get(broker, {}).get(queue, 0))
               for topic, brokers in latest.items() for broker, queues in brokers.items()
               for queue, offset in queues.items())


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
            lag = _lag(progress["sources"][0])
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


def _check(spark: SparkSession, path: Path, places: list[str], table: FeatureTable
           ) -> tuple[int, int, int]:
    """Return (rows, distinct offsets, wrong scores) of the Parquet output."""
    df = spark.read.parquet(str(path))
    counts = df.selectExpr("count(*) AS n",
                           f"count(DISTINCT {', '.join(places)}) AS offsets").first()
    assert counts is not None
    return int(counts.n), int(counts.offsets), _mismatches(spark, path, "score", table)


def run_stream_demo(rows: int = 200_000, output: Path = Path("output"),
                    partitions: int | None = None, out: IO[str] = sys.stdout,
                    master: str = "local[*]", source: str = "queue",
                    name_servers: str | None = None) -> int:
    """Run the streaming demo; return the exit code (0: every message scored once, right).

    ``source``: ``"queue"`` (a queue service started here) or ``"rocketmq"`` (a new topic of
    the RocketMQ cluster at ``name_servers``; see the module docstring).
    """
    if source not in ("queue", "rocketmq"):
        raise ValueError(f"source is 'queue' or 'rocketmq', got {source!r}")
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
    queue_server = None
    spark = None
    try:
        if source == "rocketmq":
            name_servers = (name_servers or os.environ.get("NAMESRV_ADDR")
                            or DEFAULT_NAME_SERVERS)
            topic = f"{TOPIC}-{uuid.uuid4().hex[:8]}"  # a new topic: read from its start
            where = f"RocketMQ at {name_servers}, topic {topic}"
            options = {"nameServers": name_servers, "topic": topic}
            places = ["queue_id", "queue_offset"]
        else:
            topic = TOPIC
            queue = QueueService(memory_messages=rows + PUBLISH_BATCH)
            queue_server = RemotingServer(ServerConfig(listen_port=0))
            queue.attach(queue_server)
            queue_server.start()
            where = f"queue service on {queue_server.addr}"
            options = {"addresses": queue_server.addr, "topic": topic}
            places = ["offset"]
        print(f"demo --stream: {where}, feature-store service on {scoring.addr}; Spark "
              f"{master}, {rows:,} messages, at most {per_trigger:,} per trigger -> {target}",
              file=out, flush=True)
        if queue_server is None:  # the first batch makes the topic, so the query finds it
            first = min(rows, SEND_BATCH)
            try:
                _send_rocketmq(options["nameServers"], topic, 0, first, len(table))
            except Exception as exc:
                print(f"remoting demo: could not send to RocketMQ at {options['nameServers']} "
                      f"({exc}): start one (../shared/rocketmq-broker/start.sh, or "
                      "bin/mqnamesrv and bin/mqbroker with autoCreateTopicEnable=true) or "
                      "give --name-servers", file=sys.stderr)
                return 2
        spark = _spark(partitions, master, progress_bar=_on_a_terminal(out))
        spark.conf.set("spark.sql.adaptive.enabled", "false")  # a stream has no use for it
        register_data_source(spark)
        if queue_server is None:
            producer = _Producer(options["nameServers"], rows, len(table), topic=topic,
                                 rocketmq=True, first=first)
        else:
            with RemotingClient() as client:
                QueueClient(client).create_topic(queue_server.addr, TOPIC)
            producer = _Producer(queue_server.addr, rows, len(table))
        reader = spark.readStream.format("rocketmq" if queue_server is None else "remoting")
        for key, value in options.items():
            reader = reader.option(key, value)
        events = (reader.option("startingOffsets", "earliest")
                  .option("maxMessagesPerTrigger", str(per_trigger))
                  .option("messagesPerPartition", str(max(1, per_trigger // partitions)))
                  .load())
        decoded = decode_bodies(events, "id long, user_id long").select(*places, "id",
                                                                       "user_id")
        kinds = {"offset": "long", "queue_id": "int", "queue_offset": "long"}
        scored = remote_map_in_arrow(
            decoded, scoring.addr, SCORE_BATCH,
            ", ".join(f"{p} {kinds[p]}" for p in places) + ", id long, user_id long, "
            "score double")
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
        written, offsets, wrong = _check(spark, target / "scores", places, table)
        print(f"\n{written:,} rows in {len(seen)} triggers, {seconds:.1f} s "
              f"({written / seconds:,.0f} rows/s end to end, from the first publish to the "
              f"last trigger); {offsets:,} distinct offsets; wrong scores: {wrong:,}",
              file=out)
        print(f"Parquet: {target / 'scores'}", file=out)
        return 0 if written == offsets == rows and wrong == 0 else 1
    finally:
        if spark is not None:
            spark.stop()
        if queue_server is not None:
            queue_server.shutdown()
        scoring.shutdown()
