"""A Spark job on a standalone cluster calling a fleet of servers; run in a process of its own.

    python -m tests.cluster.fleet_job --master spark://127.0.0.1:PORT --addresses A,B,C \
        --mode row|batch --rows N [--idempotent] [--on-error null|raise] \
        [--env ARCHIVE] --code ZIP --result FILE

The executors get their third-party packages from ``--env`` (a venv-pack archive, unpacked
by Spark as ``./environment``) and this checkout's packages from ``--code`` (a zip on the
executors' ``sys.path``); without ``--env`` they run this interpreter. The job upper-cases
``row-<id>`` strings through the servers and counts, in one Spark action, the rows that are
right, wrong, or failed (by error code). ``--result`` receives a JSON object: those counts,
the job's seconds, where the executors' Python and packages came from, or the failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from codec import ResponseCode
from remoting.spark import OnError, remote_batch_udf, remote_udf, with_remote_column

from .fleet_service import BATCH_UPPER, UPPER

CODES = {
    "timeout": int(ResponseCode.RPC_TIME_OUT),
    "send_failed": int(ResponseCode.RPC_SEND_TO_CHANNEL_FAILED),
    "unknown": int(ResponseCode.RPC_UNKNOWN),
    "busy": int(ResponseCode.SYSTEM_BUSY),
}
PARTITIONS = 8
ROW_TIMEOUT = 2.0
BATCH_TIMEOUT = 5.0


def session(master: str, env: str | None, code: str | None) -> SparkSession:
    """A session on ``master``; executors get ``env`` (``spark.archives``) and ``code``."""
    builder = (SparkSession.builder.master(master).appName("fleet-job")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.executor.memory", "1g")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
               .config("spark.task.maxFailures", "4"))
    if code is not None:
        builder = builder.config("spark.submit.pyFiles", code)
    if env is not None:
        # PySpark's documented way: the archive is unpacked as ./environment on each executor.
        os.environ["PYSPARK_PYTHON"] = "./environment/bin/python"
        builder = builder.config("spark.archives", f"{env}#environment")
    else:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # keeps "Lost task ..." lines: retries show
    return spark


def executor_python(spark: SparkSession) -> dict[str, Any]:
    """Where the executors' interpreter and our packages come from (one task per partition)."""

    def where(_: Any) -> Any:
        import sys as esys

        import remoting as eremoting
        yield {"executable": esys.executable, "remoting": eremoting.__file__,
               "path": list(esys.path)}

    seen = spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()
    return {"executable": sorted({s["executable"] for s in seen}),
            "remoting": sorted({s["remoting"] for s in seen}),
            "path": sorted({p for s in seen for p in s["path"]})}


def run(spark: SparkSession, addresses: str, mode: str, rows: int, *, idempotent: bool = False,
        on_error: OnError = "null", cooldown: float = 10.0) -> dict[str, Any]:
    """Run the job once; return its counts and the seconds of its one Spark action."""
    df = spark.range(rows, numPartitions=PARTITIONS).select(
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))
    if mode == "row":
        udf = remote_udf(addresses, UPPER, timeout=ROW_TIMEOUT, on_error=on_error,
                         idempotent=idempotent, cooldown=cooldown)
    else:
        udf = remote_batch_udf(addresses, BATCH_UPPER, timeout=BATCH_TIMEOUT,
                               on_error=on_error, idempotent=idempotent,
                               cooldown=cooldown)
    out = with_remote_column(df, "up", udf, "s")
    right = F.col("up") == F.upper(F.col("s"))
    counts = [F.count_if(right).alias("right"),
              F.count_if(F.col("up").isNotNull() & ~right).alias("wrong"),
              F.count_if(F.col("up").isNull()).alias("null_values")]
    if on_error == "null":
        counts.append(F.count_if(F.col("up_error").isNotNull()).alias("errors"))
        counts += [F.count_if(F.col("up_error.code") == code).alias(name)
                   for name, code in CODES.items()]
    started = time.monotonic()
    row = out.agg(F.count(F.lit(1)).alias("rows"), *counts).collect()[0]
    return {"seconds": time.monotonic() - started, **row.asDict()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--addresses", required=True)
    parser.add_argument("--mode", choices=["row", "batch"], required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--on-error", choices=["null", "raise"], default="null")
    parser.add_argument("--cooldown", type=float, default=10.0)
    parser.add_argument("--env")
    parser.add_argument("--code", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    spark = session(args.master, args.env, args.code)
    result: dict[str, Any] = {}
    try:
        result["executors"] = executor_python(spark)
        print("ready", flush=True)  # the test may now pick its moment to kill a server
        result.update(run(spark, args.addresses, args.mode, args.rows,
                          idempotent=args.idempotent, on_error=args.on_error,
                          cooldown=args.cooldown))
    except Exception as exc:  # the job failed: report how, for the test to judge
        result["failed"] = f"{type(exc).__name__}: {exc}"[-4000:]
    finally:
        spark.stop()
        with open(args.result, "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
