"""Streaming queries over the queue service on a standalone cluster; run in a process of its own.

    python -m tests.cluster.stream_job --master spark://127.0.0.1:PORT --queue ADDR \
        --messages N --per-trigger M [--env ARCHIVE] --code ZIP --work DIR --result FILE

The executors get their packages as tests/cluster/fleet_job.py's do. On topic ``events``
(N messages, published by the test), three queries run:

1. into a Parquet file sink with a checkpoint, stopped once two batches are committed, then
   restarted from the checkpoint with ``Trigger.AvailableNow``;
2. into the ``remoting`` sink (topic ``out``, bodies upper-cased), ``AvailableNow``; its last
   commit is removed from the checkpoint and it runs again, so Spark runs that batch again.

``--result`` receives a JSON object: the Parquet output's row count, distinct offsets and
bad bodies, each trigger's row count, the batch ids of the rerun, or the failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
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


def sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def exactly_once(spark: SparkSession, queue: str, per_trigger: int, work: Path
                 ) -> dict[str, Any]:
    out, checkpoint = work / "out", work / "checkpoint"
    listener = Batches(2)
    spark.streams.addListener(listener)
    first = (source(spark, queue, per_trigger).writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(checkpoint)).start())
    if not listener.enough.wait(300):
        raise RuntimeError("the first query made no two batches in 300 s")
    first.stop()
    spark.streams.removeListener(listener)
    again = (source(spark, queue, per_trigger).writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    if not again.awaitTermination(600):
        raise RuntimeError("the restarted query did not finish in 600 s")
    row = spark.read.parquet(str(out)).selectExpr(
        "count(*) AS n", "count(DISTINCT offset) AS distinct_offsets",
        "count_if(CAST(body AS STRING) != CAST(offset AS STRING)) AS bad").first()
    return {"rows": row.n, "distinct_offsets": row.distinct_offsets, "bad": row.bad,
            "triggers": sizes(first) + sizes(again),
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
    parser.add_argument("--queue", required=True)
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
        work = Path(args.work)
        result["exactly_once"] = exactly_once(spark, args.queue, args.per_trigger, work)
        result["sink"] = sink_rerun(spark, args.queue, args.per_trigger, work)
    except Exception as exc:  # the job failed: report how, for the test to judge
        result["failed"] = f"{type(exc).__name__}: {exc}"[:4000]
    finally:
        spark.stop()
        with open(args.result, "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
