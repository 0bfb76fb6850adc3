"""A streaming query over a RocketMQ topic on a standalone cluster; run in a process of its own.

    python -m tests.cluster.rocketmq_stream_job --master spark://127.0.0.1:PORT \
        --name-servers ADDR --topic TOPIC --per-trigger M [--env ARCHIVE] --code ZIP \
        --work DIR --result FILE

The executors get their packages as tests/cluster/fleet_job.py's do, and pull their offset
ranges from the broker themselves. The query reads TOPIC from its earliest offsets into a
Parquet file sink with a checkpoint, is stopped once two batches are committed, then
restarted from the checkpoint with ``Trigger.AvailableNow``.

``--result`` receives a JSON object: the output's rows, distinct (broker, queue, offset)
positions, distinct bodies and bodies that are not a number, each trigger's row count, the
batch the restart began with, or the failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from remoting.spark import register_data_source

from .fleet_job import session
from .stream_job import Batches, sizes


def source(spark: SparkSession, name_servers: str, topic: str, per_trigger: int) -> Any:
    return (spark.readStream.format("rocketmq").option("nameServers", name_servers)
            .option("topic", topic).option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", str(per_trigger)).load())


def exactly_once(spark: SparkSession, name_servers: str, topic: str, per_trigger: int,
                 work: Path) -> dict[str, Any]:
    out, checkpoint = work / "out", work / "checkpoint"

    def start(available_now: bool) -> Any:
        writer = (source(spark, name_servers, topic, per_trigger).writeStream
                  .format("parquet").option("path", str(out))
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
        "count(*) AS n",
        "count(DISTINCT broker_name, queue_id, queue_offset) AS positions",
        "count(DISTINCT body) AS bodies",
        "count_if(CAST(CAST(body AS STRING) AS BIGINT) IS NULL) AS bad").first()
    return {"rows": row.n, "positions": row.positions, "bodies": row.bodies, "bad": row.bad,
            "triggers": sizes(first) + sizes(again),
            "resumed_at": again.recentProgress[0]["batchId"] if again.recentProgress else -1}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--name-servers", required=True)
    parser.add_argument("--topic", required=True)
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
        result["exactly_once"] = exactly_once(spark, args.name_servers, args.topic,
                                              args.per_trigger, Path(args.work))
    except Exception as exc:  # the job failed: report how, for the test to judge
        result["failed"] = f"{type(exc).__name__}: {exc}"[:4000]
    finally:
        spark.stop()
        with open(args.result, "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
