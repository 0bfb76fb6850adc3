"""The demo job behind ``remoting demo`` (and ``make demo``).

It starts the feature-store service (`_feature_store`) on 127.0.0.1 in a background thread,
runs a local-mode Spark job over synthetic rows that scores every row through the service
twice, once per row (`remote_udf`) and once per Arrow batch (`remote_map_in_arrow`), writes
both enriched tables to Parquet, checks every score against the local computation, prints a
summary per mode, and stops everything.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pandas as pd
from pyspark.accumulators import AccumulatorParam

from ..._config import ServerConfig
from ...blocking import RemotingServer
from .._batch_udf import remote_map_in_arrow
from .._columns import with_remote_column
from .._row_udf import remote_udf
from ._feature_store import SCORE, SCORE_BATCH, FeatureTable, register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ModeResult", "run_demo"]

HERE = Path(__file__).resolve().parent


class _ListParam(AccumulatorParam[list[Any]]):
    """Accumulates lists (one tuple per Arrow batch) from the workers."""

    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, a: list[Any], b: list[Any]) -> list[Any]:  # noqa: N802 (pyspark's)
        a.extend(b)
        return a


@dataclass(frozen=True, slots=True)
class ModeResult:
    """One line of the summary."""

    mode: str
    rows: int
    seconds: float
    errors: int
    requests: int
    p50_ms: float
    p99_ms: float
    mismatches: int

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def _spark(partitions: int, master: str, progress_bar: bool) -> SparkSession:
    from pyspark.sql import SparkSession

    # Spark runs ``python3`` from PATH for its workers unless told: this interpreter has the
    # package (and pyspark) installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # all traffic stays on loopback
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    log4j = HERE / "log4j2.properties"
    builder = (
        SparkSession.builder.master(master).appName("trio-remoting demo")
        .config("spark.ui.enabled", "false")
        # Spark's bar redraws one line of stderr with carriage returns: in a file or a pipe
        # (stdout and stderr often the same) it ran into the demo's own lines
        .config("spark.ui.showConsoleProgress", "true" if progress_bar else "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.as_uri()}")
    )
    # A cluster's executors run this interpreter (PYSPARK_PYTHON), which has the package: its
    # workers must be on this host; docs/spark.md shows how to ship a packed virtualenv to
    # other hosts.
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def _on_a_terminal(out: IO[str]) -> bool:
    """Whether both the demo's lines and Spark's progress bar (stderr) go to a terminal."""
    return out.isatty() and sys.stderr.isatty()


def _latencies(stats: list[tuple[Any, ...]]) -> tuple[float, float]:
    """Return p50/p99 call latency in ms from the per-batch stats.

    Per-row mode: the time a request spends in flight, from each Arrow batch by Little's law
    (batch seconds x requests in flight / requests). Batch mode: one round trip per request.
    """
    per_call: list[float] = []
    for mode, _rows, requests, _errors, seconds, in_flight in stats:
        if not requests:
            continue
        concurrent = min(in_flight, requests) if mode == "row" else 1
        per_call.append(seconds * concurrent / requests * 1000.0)
    if not per_call:
        return 0.0, 0.0
    if len(per_call) == 1:
        return per_call[0], per_call[0]
    cuts = statistics.quantiles(per_call, n=100, method="inclusive")
    return cuts[49], cuts[98]


def _mismatches(spark: SparkSession, path: Path, column: str, table: FeatureTable) -> int:
    """Count rows of the Parquet table at ``path`` whose score differs from the local one."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import pandas_udf

    scores = table.scores

    @pandas_udf("double")  # type: ignore[call-overload,untyped-decorator,unused-ignore]
    def local_score(ids: pd.Series) -> pd.Series:
        return pd.Series(scores[ids.to_numpy()])

    df = spark.read.parquet(str(path))
    bad = df.where(F.col(column).isNull() | (F.col(column) != local_score("user_id")))
    return int(bad.count())


def _warm_up(spark: SparkSession, addr: str, partitions: int) -> None:
    """Start the Python workers and their clients, so the timings show the steady state."""
    from pyspark.sql import functions as F

    df = spark.range(20_000, numPartitions=partitions).select(
        "id", (F.col("id") % 100).alias("user_id"))
    df.withColumn("score", remote_udf(addr, SCORE, return_type="double")("user_id")) \
        .write.format("noop").mode("overwrite").save()
    remote_map_in_arrow(df, addr, SCORE_BATCH, "id long, user_id long, score double") \
        .write.format("noop").mode("overwrite").save()


def _run_mode(name: str, spark: SparkSession, df: Any, path: Path, acc: Any,
              table: FeatureTable, column: str) -> ModeResult:
    started = time.perf_counter()
    df.write.mode("overwrite").parquet(str(path))
    seconds = time.perf_counter() - started
    stats = list(acc.value)
    p50, p99 = _latencies(stats)
    return ModeResult(
        mode=name, rows=sum(s[1] for s in stats), seconds=seconds,
        errors=sum(s[3] for s in stats), requests=sum(s[2] for s in stats),
        p50_ms=p50, p99_ms=p99, mismatches=_mismatches(spark, path, column, table),
    )


def _summary(results: list[ModeResult], rows: int, out: IO[str]) -> None:
    head = (f"{'mode':<9} {'rows':>11} {'requests':>11} {'seconds':>8} {'rows/s':>11} "
            f"{'errors':>7} {'p50 call':>9} {'p99 call':>9} {'wrong':>6}")
    print("\n" + head, file=out)
    print("-" * len(head), file=out)
    for r in results:
        print(f"{r.mode:<9} {r.rows:>11,} {r.requests:>11,} {r.seconds:>8.2f} "
              f"{r.rows_per_second:>11,.0f} {r.errors:>7,} {r.p50_ms:>7.2f}ms "
              f"{r.p99_ms:>7.2f}ms {r.mismatches:>6,}", file=out)
    print(
        "\nseconds: the whole job (generate rows, call the service, write Parquet), after a\n"
        "  warm-up job that started the Python workers.\n"
        "wrong: rows whose score is missing or differs from the local computation.\n"
        "call latency: per-row, the time one request is in flight (Little's law over each "
        "Arrow batch);\n  batch, one round trip carrying a whole Arrow batch.",
        file=out,
    )
    if any(r.rows != rows for r in results):
        print(f"note: expected {rows:,} rows per mode", file=out)


def java_missing() -> bool:
    """True (and say so on stderr) when there is no Java for Spark to run on."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        print("remoting demo needs Java 17+ for Spark: install a JDK or set JAVA_HOME",
              file=sys.stderr)
        return True
    return False


def run_demo(rows: int = 1_000_000, output: Path = Path("output"),
             partitions: int | None = None, out: IO[str] = sys.stdout,
             master: str = "local[*]") -> int:
    """Run the demo; return the process exit code (0: every row scored and correct)."""
    if java_missing():
        return 2
    cores = os.cpu_count() or 2
    partitions = partitions or 2 * cores
    target = output.resolve() / "demo"
    table = FeatureTable()
    server = RemotingServer(ServerConfig(listen_port=0))
    register(server, table)
    server.start()
    spark = None
    try:
        where = f"Spark {master}" + (f" on {cores} cores" if master == "local[*]" else "")
        print(f"demo: feature-store service on {server.addr}; {where}, "
              f"{rows:,} rows in {partitions} partitions -> {target}", file=out, flush=True)
        spark = _spark(partitions, master, progress_bar=_on_a_terminal(out))
        from pyspark.sql import functions as F

        users = len(table)
        df = spark.range(rows, numPartitions=partitions).select(
            "id", ((F.col("id") * 7919) % users).alias("user_id"))

        print("warming up: starting the Python workers ...", file=out, flush=True)
        _warm_up(spark, server.addr, partitions)

        row_stats = spark.sparkContext.accumulator([], _ListParam())
        score = remote_udf(server.addr, SCORE, return_type="double", on_error="null",
                           on_batch=lambda s: row_stats.add(
                               [(s.mode, s.rows, s.requests, s.errors, s.seconds,
                                 s.max_in_flight)]))
        per_row = with_remote_column(df, "score", score, "user_id")
        print("[1/2] per-row mode: one request per row ...", file=out, flush=True)
        results = [_run_mode("per-row", spark, per_row, target / "per_row", row_stats, table,
                             "score")]

        batch_stats = spark.sparkContext.accumulator([], _ListParam())
        batched = remote_map_in_arrow(
            df, server.addr, SCORE_BATCH, "id long, user_id long, score double",
            on_batch=lambda s: batch_stats.add(
                [(s.mode, s.rows, s.requests, s.errors, s.seconds, s.max_in_flight)]))
        print("[2/2] batch mode: one request per Arrow batch ...", file=out, flush=True)
        results.append(_run_mode("batch", spark, batched, target / "batch", batch_stats, table,
                                 "score"))
        _summary(results, rows, out)
        print(f"\nParquet: {target / 'per_row'}  {target / 'batch'}", file=out)
        ok = all(r.rows == rows and r.errors == 0 and r.mismatches == 0 for r in results)
        return 0 if ok else 1
    finally:
        if spark is not None:
            spark.stop()
        server.shutdown()
