"""What a micro-batch costs Spark itself: the trigger latency of streaming sources that do no
I/O, beside which the `remoting` and `rocketmq` sources' triggers (bench/spark_stream.py) are
read.

    .venv/bin/python bench/spark_trigger_floor.py                 # 10,000 rows a trigger
    .venv/bin/python bench/spark_trigger_floor.py --per-trigger 30000 --triggers 20

Two sources, each read back to back (``processingTime="0 seconds"``) into the ``noop`` sink on one
``local[2]`` session (as bench/spark_stream.py's), ``--triggers`` micro-batches of
``--per-trigger`` rows:

- a Python data source (`pyspark.sql.datasource`, as ours are) whose reader only counts
  offsets and whose two partitions a trigger yield rows of a 40-byte body made in the
  executor: Spark's cost of a Python source's micro-batch (the driver's planning calls to its
  Python worker, a job, the executors' Python workers, the checkpoint's commit);
- Spark's own ``rate-micro-batch`` source (JVM, no Python): the floor of any micro-batch.

Reported: each trigger's ``triggerExecution`` (Spark's measure of a micro-batch: planning,
reading, writing, committing), p50 and p90, the first two triggers left out (warm-up).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

# Python put bench/ first on sys.path, where bench/queue.py would shadow the standard `queue`
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

BODY = b'{"id": 123456, "user_id": 789, "pad": "xx"}'[:40]


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end


class CountingReader(DataSourceStreamReader):
    """Offsets ``{"offset": n}``, ``per_trigger`` rows a trigger up to ``total``; no I/O."""

    def __init__(self, options: dict[str, str]) -> None:
        self.total = int(options["total"])
        self.per_trigger = int(options["per_trigger"])
        self.current = 0

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (pyspark's names)
        return {"offset": 0}

    def latestOffset(self) -> dict[str, int]:  # noqa: N802 (asked once a trigger)
        self.current = min(self.total, self.current + self.per_trigger)
        return {"offset": self.current}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        a, b = start["offset"], end["offset"]
        mid = (a + b) // 2
        return [_Range(a, mid), _Range(mid, b)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Range)
        for offset in range(partition.start, partition.end):
            yield (BODY, offset)

    def commit(self, end: dict[str, int]) -> None:
        pass


class CountingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "counting"

    def schema(self) -> str:
        return "body binary, offset long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
        return CountingReader(self.options)


def latencies(query: Any) -> list[float]:
    return [float(p["durationMs"]["triggerExecution"]) for p in query.recentProgress
            if p["numInputRows"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-trigger", type=int, default=10_000)
    ap.add_argument("--triggers", type=int, default=30)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.master("local[2]").appName("bench-trigger-floor")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.adaptive.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(CountingSource)
    total = args.per_trigger * args.triggers
    rows = {}
    with tempfile.TemporaryDirectory() as work:
        python = (spark.readStream.format("counting").option("total", str(total))
                  .option("per_trigger", str(args.per_trigger)).load())
        jvm = (spark.readStream.format("rate-micro-batch")
               .option("rowsPerBatch", str(args.per_trigger)).option("numPartitions", "2")
               .load())
        for name, df in (
                ("Python data source, no I/O", python),
                ("Spark's rate-micro-batch (JVM)", jvm)):
            query = (df.writeStream.format("noop")
                     .option("checkpointLocation", os.path.join(work, name[:6]))
                     .trigger(processingTime="0 seconds").start())
            while len(latencies(query)) < args.triggers:
                query.awaitTermination(1)
            query.stop()
            rows[name] = latencies(query)[2:args.triggers]
    spark.stop()
    print(f"{args.per_trigger:,} rows a trigger, local[2], triggerExecution over "
          f"{args.triggers - 2} triggers after 2")
    for name, ms in rows.items():
        ms.sort()
        print(f"  {name:32} p50 {statistics.median(ms):6.0f} ms   "
              f"p90 {ms[int(len(ms) * 0.9) - 1]:6.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
