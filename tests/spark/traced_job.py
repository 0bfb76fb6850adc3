"""A traced Spark job, run in its own process (its own SparkSession and Python workers, so the
OpenTelemetry SDK it configures in them touches no other test).

The driver configures the SDK and runs both UDF modes inside a ``job`` span; each worker
configures its own SDK through ``worker_setup``. Every process writes its finished spans as
JSON lines under SPANS_DIR. Usage: ``python -m tests.spark.traced_job ADDR SPANS_DIR``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from remoting import ClientConfig
from remoting.spark import remote_batch_udf, remote_udf

from .conftest import SPARK_CONF
from .service import BATCH_UPPER, UPPER

ROWS = 3_000
PARTITIONS = 2
ROWS_PER_BATCH = 500  # 3 Arrow batches per partition


def write_spans_to(folder: str) -> None:
    """Configure this process's SDK: every finished span, one JSON line, in ``folder``."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    out = open(os.path.join(folder, f"spans-{os.getpid()}.jsonl"), "a")  # noqa: SIM115
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(provider)


def main(addr: str, spans_dir: str) -> int:
    write_spans_to(spans_dir)
    from opentelemetry import trace

    builder = SparkSession.builder.master(f"local[{PARTITIONS}]").appName("traced")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ROWS_PER_BATCH))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def setup() -> None:
        write_spans_to(spans_dir)

    config = ClientConfig(connect_timeout=2.9)  # a client of its own in each worker
    try:
        df = spark.range(ROWS, numPartitions=PARTITIONS).select(
            F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))
        with trace.get_tracer("job").start_as_current_span("job"):
            rows = remote_udf(addr, UPPER, config=config, worker_setup=setup)
            batches = remote_batch_udf(addr, BATCH_UPPER, config=config, worker_setup=setup)
            by_row = df.select("s", rows("s").alias("up")).collect()
            by_batch = df.select("s", batches("s").alias("up")).collect()
        bad = [r for r in by_row + by_batch if r["up"] != r["s"].upper()]
        print(f"rows={len(by_row)}+{len(by_batch)} bad={len(bad)}")
        return 0 if len(by_row) == len(by_batch) == ROWS and not bad else 1
    finally:
        spark.stop()
        trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], str(Path(sys.argv[2]).resolve())))
