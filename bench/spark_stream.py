"""Streaming benchmark: Structured Streaming queries over the queue service and over a real
RocketMQ 4.9.8 broker, against the batch UDF's rate on the same data.

    .venv/bin/python bench/spark_stream.py                    # 500,000 messages, local[2]
    .venv/bin/python bench/spark_stream.py --rows 20000 --repeats 1   # a quick check
    .venv/bin/python bench/spark_stream.py --source queue     # the queue service only

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

With ``--source rocketmq`` (or ``both``, the default) the same messages also go to a topic
of 4 queues on a RocketMQ broker started here (`tests.rocketmq.cluster`, as ``make
test-rocketmq``: RMQ_HOME, Java 17), and the stream and the batch read run again with
``format("rocketmq")``. Beside them, Java's own 4.9.8 push consumer (RmqPeer
``bench-consume``, a new group from the first offset) reads the same topic from the same
broker in the same sitting: its rate is the reference of the RocketMQ rows (``vs Java``).

Each variant runs ``--repeats`` times after a warm-up (Python workers started); the median
counts, the spread is shown. The stream's rate counts its triggers' own time (Spark's
``triggerExecution``) apart from the query's start and stop. The machine may be shared:
compare ratios, not absolute figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Python put bench/ first on sys.path, where bench/codec.py would shadow the `codec` package;
# the checkout's root goes first (the RocketMQ cluster of tests/rocketmq).
_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(_HERE)
sys.path[:] = [ROOT] + [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

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


def publish_rocketmq(name_servers: str, topic: str, rows: int) -> None:
    from remoting.rocketmq import Outgoing, Producer

    with Producer(name_servers, "bench-spark-stream") as producer:
        for start in range(0, rows, 1024):
            producer.send_batch(topic, [
                Outgoing(json.dumps({"id": i, "user_id": i * 7919 % USERS}).encode())
                for i in range(start, min(rows, start + 1024))])


def scored(df: Any, scoring: str) -> Any:
    place = "offset" if "offset" in df.columns else "queue_offset"  # queue service, RocketMQ
    decoded = decode_bodies(df, "id long, user_id long").select(
        df[place].alias("offset"), "id", "user_id")
    return remote_map_in_arrow(decoded, scoring, SCORE_BATCH, SCHEMA)


def source(reader: Any, where: dict[str, str], per_partition: int) -> Any:
    """``reader`` (``spark.read`` or ``spark.readStream``) of the topic ``where`` names."""
    reader = reader.format(where["format"])
    for key, value in where.items():
        if key != "format":
            reader = reader.option(key, value)
    return reader.option("messagesPerPartition", str(per_partition))


def run_stream(spark: Any, where: dict[str, str], scoring: str, per_trigger: int,
               per_partition: int, checkpoint: str) -> tuple[float, list[float]]:
    """Return (seconds, each trigger's ms) of one AvailableNow query over the whole topic."""
    stream = (source(spark.readStream, where, per_partition)
              .option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", str(per_trigger)).load())
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


def run_batch_read(spark: Any, where: dict[str, str], scoring: str,
                   per_partition: int) -> float:
    df = source(spark.read, where, per_partition).load()
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


def java_consume_rates(name_servers: str, topic: str, rows: int, repeats: int,
                       work: Path) -> list[float]:
    """Java's own push consumer over the same topic, a new group each time: messages/s from
    the first message to the last (RmqPeer ``bench-consume``)."""
    from tests.rocketmq.java_peer import java_peer_in

    rates = []
    with java_peer_in(work) as peer:
        for repeat in range(repeats):
            result = peer.bench("bench-consume", name_servers, topic, n=rows, warmup=0,
                                group=f"bench-java-{os.getpid()}-{repeat}")
            if result.get("complete") is False or result.get("lost"):
                raise RuntimeError(f"Java's consumer did not read the topic whole: {result}")
            rates.append(float(result["rate"]))
    return rates


def rocketmq_cluster(stack: contextlib.ExitStack, tmp: str) -> Any:
    from tests.rocketmq.cluster import RocketMQCluster

    return stack.enter_context(RocketMQCluster(run_dir=Path(tmp) / "rocketmq"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--per-trigger", type=int, default=None,
                        help="maxMessagesPerTrigger (default: rows / 10)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--source", choices=("queue", "rocketmq", "both"), default="both",
                        help="what the stream reads: the queue service, a RocketMQ broker "
                             "started here (Java 17, RMQ_HOME), or both (default)")
    parser.add_argument("--json", help="write the results as JSON here too")
    args = parser.parse_args()
    per_trigger = args.per_trigger or max(1_000, args.rows // 10)
    per_partition = max(1, per_trigger // args.partitions)

    results: dict[str, dict[str, Any]] = {}
    trigger_ms: dict[str, list[float]] = {}
    java_rates: list[float] = []
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-spark-stream-"))
        scoring = RemotingServer(ServerConfig(listen_port=0))
        register(scoring)
        scoring.start()
        stack.callback(scoring.shutdown)
        sources: dict[str, dict[str, str]] = {}
        if args.source in ("queue", "both"):
            queue = QueueService(memory_messages=args.rows + 4096)
            queue_server = RemotingServer(ServerConfig(listen_port=0))
            queue.attach(queue_server)
            queue_server.start()
            stack.callback(queue_server.shutdown)
            publish(queue_server.addr, args.rows)
            sources["queue service"] = {"format": "remoting", "addresses": queue_server.addr,
                                        "topic": TOPIC}
        if args.source in ("rocketmq", "both"):
            cluster = rocketmq_cluster(stack, tmp)
            topic = cluster.new_topic("bench-spark", queues=4)
            publish_rocketmq(cluster.namesrv_addr, topic, args.rows)
            sources["RocketMQ"] = {"format": "rocketmq", "nameServers": cluster.namesrv_addr,
                                   "topic": topic}
        spark = session(args.master, args.partitions)
        stack.callback(spark.stop)
        run_batch_udf(spark, scoring.addr, min(args.rows, 20_000), args.partitions)  # warm
        runs: dict[str, list[float]] = {}
        for repeat in range(args.repeats):  # interleaved rounds: drift hits all alike
            for name, where in sources.items():
                seconds, triggers = run_stream(spark, where, scoring.addr, per_trigger,
                                               per_partition, f"{tmp}/{name}-{repeat}")
                runs.setdefault(f"{name} stream, triggers", []).append(sum(triggers) / 1000)
                runs.setdefault(f"{name} stream, start to end", []).append(seconds)
                trigger_ms.setdefault(name, []).extend(triggers)
                runs.setdefault(f"{name} batch read", []).append(
                    run_batch_read(spark, where, scoring.addr, per_partition))
            runs.setdefault("batch UDF alone", []).append(
                run_batch_udf(spark, scoring.addr, args.rows, args.partitions))
        for name, seconds_list in runs.items():
            results[name] = {"seconds": seconds_list,
                             "rows_per_second": args.rows / statistics.median(seconds_list)}
        if "RocketMQ" in sources:
            java_rates = java_consume_rates(sources["RocketMQ"]["nameServers"],
                                            sources["RocketMQ"]["topic"], args.rows,
                                            args.repeats, Path(tmp) / "java")

    udf_rate = results["batch UDF alone"]["rows_per_second"]
    java_rate = statistics.median(java_rates) if java_rates else None
    print(f"\n{args.rows:,} messages, {per_trigger:,} per trigger, {args.partitions} "
          f"partitions, {args.master}, median of {args.repeats}")
    print(f"{'variant':<34} {'rows/s':>10} {'vs UDF':>7} {'vs Java':>8} {'seconds':>8} "
          f"{'spread':>13}")
    for name, r in results.items():
        seconds_list = r["seconds"]
        versus_java = (f"{r['rows_per_second'] / java_rate:>7.2f}x"
                       if java_rate and name.startswith("RocketMQ") else f"{'':>8}")
        print(f"{name:<34} {r['rows_per_second']:>10,.0f} "
              f"{r['rows_per_second'] / udf_rate:>6.2f}x {versus_java} "
              f"{statistics.median(seconds_list):>8.2f} "
              f"{min(seconds_list):>6.2f}-{max(seconds_list):<6.2f}")
    if java_rate:
        print(f"{'Java push consumer (RocketMQ)':<34} {java_rate:>10,.0f} "
              f"{java_rate / udf_rate:>6.2f}x {1.0:>7.2f}x   (bench-consume, first message "
              "to last)")
    for name, triggers in trigger_ms.items():
        ordered = sorted(triggers)
        if ordered:
            p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
            print(f"{name} trigger latency (triggerExecution, {per_trigger:,} messages): "
                  f"p50 {statistics.median(ordered):,.0f} ms, p90 {p90:,.0f} ms over "
                  f"{len(ordered)} triggers")
    if args.json:
        sys.path.append(_HERE)
        from _report import write_json

        write_json(args.json, {"rows": args.rows, "per_trigger": per_trigger,
                               "partitions": args.partitions, "master": args.master,
                               "results": results, "trigger_ms": trigger_ms,
                               "java_consume_rates": java_rates})
    return 0


if __name__ == "__main__":
    sys.exit(main())
