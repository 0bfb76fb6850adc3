"""Streaming benchmark: a Structured Streaming query over the queue service, against the batch
UDF's rate on the same data.

    .venv/bin/python bench/spark_stream.py                    # 500,000 messages, local[2]
    .venv/bin/python bench/spark_stream.py --rows 20000 --repeats 1   # a quick check

The same ``rows`` JSON messages (``{"id": i, "user_id": u}``) are published once to a queue
service in this process; a scoring service (the demo's feature store, `SCORE_BATCH`: one
request per Arrow batch) runs beside it. Three variants write to Spark's ``noop`` sink, so
the cost is reading, decoding and calling, not writing:

- stream: ``readStream.format("remoting")`` from the earliest offset with
  ``Trigger.AvailableNow`` and ``maxMessagesPerTrigger``, ``decode_bodies``, then
  `remote_map_in_arrow`: rows/s from the query's start to its end, and each trigger's latency
  (Spark's ``triggerExecution``: planning, reading, calling and writing a micro-batch);
- batch read: the same pipeline as one batch job over ``spark.read.format("remoting")``;
- batch UDF: `remote_map_in_arrow` alone over the same rows made by ``spark.range``.

Each variant runs ``--repeats`` times after a warm-up (Python workers started); the median
counts, the spread is shown. The machine may be shared: compare ratios, not absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

# Python put bench/ first on sys.path, where bench/codec.py would shadow the `codec` package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from remoting import RemotingClient, RemotingServer, ServerConfig  # noqa: E402
from remoting.queue import QueueClient, QueueService  # noqa: E402
from remoting.spark import decode_bodies, register_data_source, remote_map_in_arrow  # noqa: E402
from remoting.spark._demo._feature_store import SCORE_BATCH, USERS, register  # noqa: E402

TOPIC = "bench"
SCHEMA = "offset long, id long, user_id long, score double"


def session(master: str, partitions: int) -> Any:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.master(master).appName("bench-spark-stream")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", str(partitions))
             .config("spark.sql.adaptive.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    return spark


def publish(addr: str, rows: int) -> None:
    with RemotingClient() as client:
        q = QueueClient(client)
        for start in range(0, rows, 4096):
            q.publish_many(addr, TOPIC, [
                json.dumps({"id": i, "user_id": i * 7919 % USERS}).encode()
                for i in range(start, min(rows, start + 4096))])


def scored(df: Any, scoring: str) -> Any:
    decoded = decode_bodies(df, "id long, user_id long").select("offset", "id", "user_id")
    return remote_map_in_arrow(decoded, scoring, SCORE_BATCH, SCHEMA)


def run_stream(spark: Any, queue: str, scoring: str, per_trigger: int, per_partition: int,
               checkpoint: str) -> tuple[float, list[float]]:
    """Return (seconds, each trigger's ms) of one AvailableNow query over the whole topic."""
    stream = (spark.readStream.format("remoting").option("addresses", queue)
              .option("topic", TOPIC).option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", str(per_trigger))
              .option("messagesPerPartition", str(per_partition)).load())
    started = time.perf_counter()
    query = (scored(stream, scoring).writeStream.format("noop")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    triggers = [float(p["durationMs"]["triggerExecution"]) for p in query.recentProgress
                if p["numInputRows"]]
    return seconds, triggers


def run_batch_read(spark: Any, queue: str, scoring: str, per_partition: int) -> float:
    df = (spark.read.format("remoting").option("addresses", queue).option("topic", TOPIC)
          .option("messagesPerPartition", str(per_partition)).load())
    started = time.perf_counter()
    scored(df, scoring).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def run_batch_udf(spark: Any, scoring: str, rows: int, partitions: int) -> float:
    from pyspark.sql import functions as F

    df = spark.range(rows, numPartitions=partitions).select(
        F.col("id").alias("offset"), "id", ((F.col("id") * 7919) % USERS).alias("user_id"))
    started = time.perf_counter()
    remote_map_in_arrow(df, scoring, SCORE_BATCH, SCHEMA).write.format("noop") \
        .mode("overwrite").save()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--per-trigger", type=int, default=None,
                        help="maxMessagesPerTrigger (default: rows / 10)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", help="write the results as JSON here too")
    args = parser.parse_args()
    per_trigger = args.per_trigger or max(1_000, args.rows // 10)
    per_partition = max(1, per_trigger // args.partitions)

    scoring = RemotingServer(ServerConfig(listen_port=0))
    register(scoring)
    scoring.start()
    queue = QueueService(memory_messages=args.rows + 4096)
    queue_server = RemotingServer(ServerConfig(listen_port=0))
    queue.attach(queue_server)
    queue_server.start()
    spark = session(args.master, args.partitions)
    results: dict[str, dict[str, Any]] = {}
    try:
        publish(queue_server.addr, args.rows)
        with tempfile.TemporaryDirectory() as tmp:
            run_batch_udf(spark, scoring.addr, min(args.rows, 20_000), args.partitions)  # warm
            stream_runs, trigger_ms = [], []
            read_runs, udf_runs = [], []
            for repeat in range(args.repeats):  # interleaved rounds: drift hits all alike
                seconds, triggers = run_stream(spark, queue_server.addr, scoring.addr,
                                               per_trigger, per_partition,
                                               f"{tmp}/checkpoint-{repeat}")
                stream_runs.append(seconds)
                trigger_ms += triggers
                read_runs.append(run_batch_read(spark, queue_server.addr, scoring.addr,
                                                per_partition))
                udf_runs.append(run_batch_udf(spark, scoring.addr, args.rows,
                                              args.partitions))
        for name, runs in (("stream (AvailableNow)", stream_runs),
                           ("batch read of the topic", read_runs),
                           ("batch UDF alone", udf_runs)):
            results[name] = {"seconds": runs, "rows_per_second": args.rows /
                             statistics.median(runs)}
        results["stream (AvailableNow)"]["trigger_ms"] = trigger_ms
    finally:
        spark.stop()
        queue_server.shutdown()
        scoring.shutdown()

    udf_rate = results["batch UDF alone"]["rows_per_second"]
    print(f"\n{args.rows:,} messages, {per_trigger:,} per trigger, {args.partitions} "
          f"partitions, {args.master}, median of {args.repeats}")
    print(f"{'variant':<25} {'rows/s':>10} {'vs UDF':>7} {'seconds':>8} {'spread':>13}")
    for name, r in results.items():
        runs = r["seconds"]
        print(f"{name:<25} {r['rows_per_second']:>10,.0f} {r['rows_per_second'] / udf_rate:>6.2f}x"
              f" {statistics.median(runs):>8.2f} {min(runs):>6.2f}-{max(runs):<6.2f}")
    triggers = sorted(results["stream (AvailableNow)"]["trigger_ms"])
    if triggers:
        p90 = triggers[min(len(triggers) - 1, int(len(triggers) * 0.9))]
        print(f"trigger latency (triggerExecution): p50 {statistics.median(triggers):,.0f} ms, "
              f"p90 {p90:,.0f} ms over {len(triggers)} triggers")
    if args.json:
        sys.path.append(_HERE)
        from _report import write_json

        write_json(args.json, {"rows": args.rows, "per_trigger": per_trigger,
                               "partitions": args.partitions, "master": args.master,
                               "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
