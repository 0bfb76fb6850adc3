"""Where a trigger of the streaming sources goes: Spark's phases of each micro-batch, for the
``remoting`` (queue service) and ``rocketmq`` sources and for sources that do no I/O, on one
session, with the sources' own calls timed apart outside Spark.

    .venv/bin/python bench/spark_trigger_breakdown.py                 # both sources
    .venv/bin/python bench/spark_trigger_breakdown.py --source queue  # no broker needed
    .venv/bin/python bench/spark_trigger_breakdown.py --per-trigger 30000 --triggers 12

Queries (``processingTime="0 seconds"``, ``maxMessagesPerTrigger`` = ``--per-trigger``, 2
partitions a trigger as bench/spark_stream.py plans them (``--per-partition``: another
``messagesPerPartition``), into the ``noop`` sink), each
``--triggers`` micro-batches after 2 of warm-up, in the same session:

- floor, rows: bench/spark_trigger_floor.py's Python source that does no I/O, its rows
  yielded as Python tuples;
- floor, Arrow: the same, its rows one Arrow batch of the queue source's schema per
  partition (made once per worker process): Spark's cost of a Python source whose reads
  cost nothing, the Arrow hand-off to the JVM included;
- floor, JVM: Spark's ``rate-micro-batch`` source;
- each source alone (``noop`` straight from ``load()``), with ``decode_bodies``, and with
  bench/spark_stream.py's whole pipeline (``decode_bodies`` then ``remote_map_in_arrow`` to
  the demo's scoring service): what the pipeline adds to a trigger is not the source's.

For each: the p50 of Spark's ``durationMs`` (``latestOffset``: the driver's Python source
planning the trigger's end; ``queryPlanning``; ``getBatch``; ``walCommit``: the offsets log
written; ``addBatch``: the job, where the executors read; ``commitOffsets``: the commit log
and the source's ``commit``; ``triggerExecution``: the whole). Then, outside Spark, in this
process over the same data: the driver's calls (the queue's OFFSETS; RocketMQ's routes and
queue ends) and an executor's work for one partition (its pulls, then the decode into the
Arrow batch Spark gets), with a new client (a cold connection) and a warm one.

The machine may be shared: read the figures as indicative, and compare within a run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(_HERE)
sys.path[:] = [ROOT] + [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from pyspark.sql.datasource import DataSource, DataSourceStreamReader  # noqa: E402

from remoting import RemotingClient, RemotingServer, ServerConfig  # noqa: E402
from remoting.queue import QueueService  # noqa: E402
from remoting.spark import decode_bodies  # noqa: E402


def _bench_module(name: str) -> Any:
    """Import bench/<name>.py (each strips bench/ from sys.path: bench/queue.py would shadow
    the standard `queue`)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, f"{name}.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


spark_stream = _bench_module("spark_stream")
spark_trigger_floor = _bench_module("spark_trigger_floor")

PHASES = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch",
          "commitOffsets", "triggerExecution")


class ArrowReader(spark_trigger_floor.CountingReader):
    """bench/spark_trigger_floor.py's reader, yielding one Arrow batch of the queue source's
    schema per partition (made once per process, cut to the partition's size)."""

    def read(self, partition: Any) -> Iterator[Any]:
        batch = _arrow_rows(partition.end - partition.start)
        yield batch


_ROWS: dict[int, Any] = {}


def _arrow_rows(n: int) -> Any:
    if n not in _ROWS:
        import pyarrow as pa

        from remoting.spark._streaming._reading import arrow_schema

        schema = arrow_schema()
        _ROWS[n] = pa.record_batch([
            pa.array(range(n), pa.int64()),
            pa.array([1_700_000_000_000_000] * n, schema.field("timestamp").type),
            pa.array([[]] * n, schema.field("headers").type),
            pa.array([spark_trigger_floor.BODY] * n, pa.binary()),
        ], schema=schema)
    return _ROWS[n]


class ArrowSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "counting_arrow"

    def schema(self) -> Any:
        from remoting.spark._streaming._reading import spark_schema

        return spark_schema()

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802 (pyspark's)
        return ArrowReader(self.options)


def durations(query: Any) -> list[dict[str, float]]:
    return [{k: float(v) for k, v in p["durationMs"].items()} for p in query.recentProgress
            if p["numInputRows"]]


def run_query(df: Any, checkpoint: str, triggers: int) -> dict[str, float]:
    """Return the p50 of each phase over ``triggers`` micro-batches after 2."""
    query = (df.writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(processingTime="0 seconds").start())
    try:  # lastProgress, not recentProgress: py4j walks that one's list (~0.1 s of CPU)
        while (query.lastProgress or {}).get("batchId", -1) < triggers + 2:
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            query.awaitTermination(0.5)
    finally:
        query.stop()
    kept = durations(query)[2:triggers + 2]
    return {phase: statistics.median(d.get(phase, 0.0) for d in kept) for phase in PHASES}


def timed(fn: Callable[[], object], repeats: int = 7) -> float:
    """Median ms of ``fn()``."""
    ms = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - began) * 1000)
    return statistics.median(ms)


def queue_calls_ms(addr: str, per_partition: int) -> dict[str, float]:
    """The queue source's own calls outside Spark: the driver's and an executor's."""
    from remoting.queue._wire import MAX_PULL
    from remoting.spark._streaming._calls import QueueCalls
    from remoting.spark._streaming._options import source_options
    from remoting.spark._streaming._reading import read_range, records_batch

    calls = QueueCalls(source_options({"addresses": addr, "topic": spark_stream.TOPIC},
                                      streaming=True).queue)
    pulled = []

    def pulls() -> None:
        pulled.clear()
        at = 0
        while at < per_partition:
            answer = calls.pull(at, min(MAX_PULL, per_partition - at))
            pulled.append(answer)
            at += len(answer.fields())

    def decode() -> None:
        for answer in pulled:
            records_batch(answer, per_partition)

    def cold_partition() -> None:
        with RemotingClient() as client:
            from remoting.queue._client import BlockingQueueClient
            BlockingQueueClient(client).offsets(addr, spark_stream.TOPIC)

    calls.offsets(0)
    pulls()
    return {
        "driver: OFFSETS (latestOffset's call)": timed(lambda: calls.offsets(0)),
        "executor: a new client's first call (connect)": timed(cold_partition),
        f"executor: pulls of {per_partition:,} (no decode)": timed(pulls),
        f"executor: decode of {per_partition:,} into Arrow": timed(decode),
        f"executor: read_range of {per_partition:,} (pulls + decode)":
            timed(lambda: sum(1 for _ in read_range(calls, 0, per_partition))),
    }


def rocketmq_calls_ms(where: dict[str, str], per_partition: int) -> dict[str, float]:
    """The RocketMQ source's own calls outside Spark: the driver's and an executor's."""
    from remoting.rocketmq._arrow_codec import messages_batch
    from remoting.spark._streaming._rocketmq._cluster import Cluster
    from remoting.spark._streaming._rocketmq._offsets import Segment
    from remoting.spark._streaming._rocketmq._options import source_options
    from remoting.spark._streaming._rocketmq._reading import for_spark, read_segments

    options = source_options({"nameServers": where["nameServers"], "topic": where["topic"]},
                             streaming=True)
    cluster = Cluster(options.cluster)
    queues = cluster.queues(options.topics)
    per_queue = per_partition // 2  # a partition of 2 of the 4 queues, as planned
    keys = sorted(queues)[:2]
    segments = [Segment(*key, 0, per_queue) for key in keys]
    reads: list[Any] = []

    def pulls() -> None:
        reads.clear()
        for s in segments:
            reads.append(cluster.read(s, queues[s.key], options))

    def decode() -> None:
        for s, read in zip(segments, reads, strict=True):
            batch, _ = messages_batch(read.bodies, read.windows, s.broker, options.tags)
            for_spark(batch)

    pulls()
    return {
        "driver: routes (latestOffset's first call)":
            timed(lambda: cluster.queues(options.topics)),
        "driver: queue ends (latestOffset's second call)": timed(lambda: cluster.bounds(queues)),
        f"executor: pulls of {per_partition:,} (no decode)": timed(pulls),
        f"executor: decode of {per_partition:,} into Arrow": timed(decode),
        f"executor: read_segments of {per_partition:,} (pulls + decode)": timed(
            lambda: sum(1 for _ in read_segments(cluster, options, segments, queues))),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-trigger", type=int, default=10_000)
    parser.add_argument("--triggers", type=int, default=15)
    parser.add_argument("--per-partition", type=int, default=None,
                        help="messagesPerPartition (default: half a trigger, 2 tasks)")
    parser.add_argument("--source", choices=("queue", "rocketmq", "both"), default="both")
    parser.add_argument("--only", help="run only the queries whose name holds this text")
    parser.add_argument("--json", help="write the results as JSON here too")
    args = parser.parse_args()
    per_trigger = args.per_trigger
    per_partition = args.per_partition or max(1, per_trigger // 2)
    rows = per_trigger * (args.triggers + 3)

    results: dict[str, dict[str, float]] = {}
    calls: dict[str, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-breakdown-"))
        scoring = RemotingServer(ServerConfig(listen_port=0))
        spark_stream.register(scoring)
        scoring.start()
        stack.callback(scoring.shutdown)
        sources: dict[str, dict[str, str]] = {}
        if args.source in ("queue", "both"):
            service = QueueService(memory_messages=rows + 4096)
            server = RemotingServer(ServerConfig(listen_port=0))
            service.attach(server)
            server.start()
            stack.callback(server.shutdown)
            spark_stream.publish(server.addr, rows)
            sources["queue"] = {"format": "remoting", "addresses": server.addr,
                                "topic": spark_stream.TOPIC}
        if args.source in ("rocketmq", "both"):
            cluster = spark_stream.rocketmq_cluster(stack, tmp)
            topic = cluster.new_topic("bench-breakdown", queues=4)
            spark_stream.publish_rocketmq(cluster.namesrv_addr, topic, rows)
            sources["rocketmq"] = {"format": "rocketmq", "nameServers": cluster.namesrv_addr,
                                   "topic": topic}
        spark = spark_stream.session("local[2]", 2)
        stack.callback(spark.stop)
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(spark_trigger_floor)
        spark.dataSource.register(spark_trigger_floor.CountingSource)
        spark.dataSource.register(ArrowSource)
        total = str(per_trigger * (args.triggers + 3))
        queries: dict[str, Callable[[], Any]] = {
            "floor: Python source, rows": lambda: (
                spark.readStream.format("counting").option("total", total)
                .option("per_trigger", str(per_trigger)).load()),
            "floor: Python source, Arrow": lambda: (
                spark.readStream.format("counting_arrow").option("total", total)
                .option("per_trigger", str(per_trigger)).load()),
            "floor: JVM rate-micro-batch": lambda: (
                spark.readStream.format("rate-micro-batch")
                .option("rowsPerBatch", str(per_trigger)).option("numPartitions", "2").load()),
        }
        for name, where in sources.items():
            def load(where: dict[str, str] = where) -> Any:
                return (spark_stream.source(spark.readStream, where, per_partition)
                        .option("startingOffsets", "earliest")
                        .option("maxMessagesPerTrigger", str(per_trigger)).load())
            queries[f"{name}: source alone"] = load
            queries[f"{name}: + decode_bodies"] = lambda load=load: decode_bodies(
                load(), "id long, user_id long")
            queries[f"{name}: + decode + remote_map_in_arrow"] = (
                lambda load=load: spark_stream.scored(load(), scoring.addr))
        spark_stream.run_batch_udf(spark, scoring.addr, 20_000, 2)  # workers started
        for i, (name, make) in enumerate(queries.items()):
            if args.only and args.only not in name:
                continue
            results[name] = run_query(make(), f"{tmp}/q{i}", args.triggers)
            print(f"{name:<42} " + " ".join(f"{p} {results[name][p]:.0f}" for p in PHASES),
                  flush=True)
        if "queue" in sources:
            calls["queue"] = queue_calls_ms(sources["queue"]["addresses"], per_partition)
        if "rocketmq" in sources:
            calls["rocketmq"] = rocketmq_calls_ms(sources["rocketmq"], per_partition)

    print(f"\n{per_trigger:,} messages a trigger, {per_partition:,} a partition, local[2]; "
          f"p50 of "
          f"{args.triggers} triggers after 2 (ms)")
    short = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch",
             "commitOffsets", "triggerExecution")
    print(f"{'query':<42} " + " ".join(f"{s[:10]:>10}" for s in short))
    for name, r in results.items():
        print(f"{name:<42} " + " ".join(f"{r[p]:>10.0f}" for p in short))
    for name, timing in calls.items():
        print(f"\n{name} source's own calls outside Spark (median of 7, ms)")
        for what, ms in timing.items():
            print(f"  {what:<58} {ms:8.1f}")
    if args.json:
        write_json = _bench_module("_report").write_json

        write_json(args.json, {"per_trigger": per_trigger, "triggers": args.triggers,
                               "results": results, "calls": calls})
    return 0


if __name__ == "__main__":
    sys.exit(main())
