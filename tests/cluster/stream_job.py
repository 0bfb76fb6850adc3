"""Streaming queries on a standalone cluster, over the queue service or a RocketMQ topic; run
in a process of its own.

    python -m tests.cluster.stream_job --master spark://127.0.0.1:PORT \
        (--queue ADDR | --name-servers ADDR --topic TOPIC) --per-trigger M \
        [--env ARCHIVE] --code ZIP --work DIR --result FILE

The executors get their packages as tests/cluster/fleet_job.py's do. With ``--queue``, on the
service's topic ``events`` (published by the test), two queries run:

1. into a Parquet file sink with a checkpoint, stopped once two batches are committed, then
   restarted from the checkpoint with ``Trigger.AvailableNow``;
2. into the ``remoting`` sink (topic ``out``, bodies upper-cased), ``AvailableNow``; its last
   commit is removed from the checkpoint and it runs again, so Spark runs that batch again.

With ``--name-servers``, the first over the RocketMQ topic ``TOPIC`` (the executors pull
their offset ranges from the broker).

``--result`` receives a JSON object: the Parquet output's row count, distinct positions
(offsets; RocketMQ: broker, queue and offset) and bodies that are not a number (RocketMQ: and
distinct bodies), each trigger's row count, the batch ids of the rerun, or the failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener

from remoting.spark import register_data_source

from .fleet_job import session


class Batches(StreamingQueryListener):
    """Sets ``enough`` once ``count`` batches with rows have been reported."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.seen = 0
        self.enough = threading.Event()

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (pyspark's)
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        if event.progress.numInputRows:
            self.seen += 1
            if self.seen >= self.count:
                self.enough.set()

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        self.enough.set()


def source(spark: SparkSession, queue: str, per_trigger: int) -> Any:
    return (spark.readStream.format("remoting").option("addresses", queue)
            .option("topic", "events").option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", str(per_trigger))
            .option("messagesPerPartition", str(max(1, per_trigger // 4))).load())


def rocketmq_source(spark: SparkSession, name_servers: str, topic: str, per_trigger: int
                    ) -> Any:
    return (spark.readStream.format("rocketmq").option("nameServers", name_servers)
            .option("topic", topic).option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", str(per_trigger)).load())


# what the output is checked with, per source (SQL aggregates over the Parquet rows)
QUEUE_CHECKS = {"rows": "count(*)", "distinct_offsets": "count(DISTINCT offset)",
                "bad": "count_if(CAST(body AS STRING) != CAST(offset AS STRING))"}
ROCKETMQ_CHECKS = {"rows": "count(*)",
                   "positions": "count(DISTINCT broker_name, queue_id, queue_offset)",
                   "bodies": "count(DISTINCT body)",
                   "bad": "count_if(CAST(CAST(body AS STRING) AS BIGINT) IS NULL)"}


def sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def exactly_once(spark: SparkSession, read: Callable[[], Any], checks: dict[str, str],
                 work: Path) -> dict[str, Any]:
    """Read ``read()``'s stream into Parquet, stop after two batches, restart from the
    checkpoint with ``AvailableNow``; return ``checks`` over the output, each trigger's rows
    and the batch the restart began with."""
    out, checkpoint = work / "out", work / "checkpoint"

    def start(available_now: bool) -> Any:
        writer = (read().writeStream.format("parquet").option("path", str(out))
                  .option("checkpointLocation", str(checkpoint)))
        return (writer.trigger(availableNow=True) if available_now else writer).start()

    listener = Batches(2)
    spark.streams.addListener(listener)
    first = start(available_now=False)
    if not listener.enough.wait(300):
        raise RuntimeError("the first query made no two batches in 300 s")
    first.stop()
    spark.streams.removeListener(listener)
    again = start(available_now=True)
    if not again.awaitTermination(600):
        raise RuntimeError("the restarted query did not finish in 600 s")
    row = spark.read.parquet(str(out)).selectExpr(
        *(f"{sql} AS {name}" for name, sql in checks.items())).first()
    assert row is not None
    return {**row.asDict(), "triggers": sizes(first) + sizes(again),
            "resumed_at": again.recentProgress[0]["batchId"] if again.recentProgress else -1}


def sink_rerun(spark: SparkSession, queue: str, per_trigger: int, work: Path
               ) -> dict[str, Any]:
    checkpoint = work / "sink-checkpoint"

    def run() -> Any:
        query = (source(spark, queue, per_trigger)
                 .selectExpr("upper(concat('m', CAST(body AS STRING))) AS body")
                 .writeStream.format("remoting").option("addresses", queue)
                 .option("topic", "out").option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        if not query.awaitTermination(600):
            raise RuntimeError("the sink's query did not finish in 600 s")
        return query

    run()
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    rerun = run()
    return {"rerun_batches": [p["batchId"] for p in rerun.recentProgress
                              if p["numInputRows"]], "last": last}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--queue")
    parser.add_argument("--name-servers")
    parser.add_argument("--topic")
    parser.add_argument("--per-trigger", type=int, required=True)
    parser.add_argument("--env")
    parser.add_argument("--code", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    spark = session(args.master, args.env, args.code)
    result: dict[str, Any] = {}
    try:
        register_data_source(spark)
        work, per = Path(args.work), args.per_trigger
        if args.queue:
            result["exactly_once"] = exactly_once(
                spark, lambda: source(spark, args.queue, per), QUEUE_CHECKS, work)
            result["sink"] = sink_rerun(spark, args.queue, per, work)
        else:
            result["exactly_once"] = exactly_once(
                spark, lambda: rocketmq_source(spark, args.name_servers, args.topic, per),
                ROCKETMQ_CHECKS, work)
    except Exception as exc:  # the job failed: report how, for the test to judge
        result["failed"] = f"{type(exc).__name__}: {exc}"[:4000]
    finally:
        spark.stop()
        with open(args.result, "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
