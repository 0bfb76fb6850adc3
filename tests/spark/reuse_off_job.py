"""A Spark job run in its own process with ``spark.python.worker.reuse=false``.

``spark.python.worker.reuse`` is fixed when the SparkContext starts, so the test session
cannot switch it off; `test_worker_reuse_off_gives_one_client_per_task` runs this script
instead. Usage: ``python -m tests.spark.reuse_off_job ADDR TAG PARTITIONS``. Exits 0 when
every row equals the local computation.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from remoting.spark import remote_udf

from .conftest import SPARK_CONF
from .service import WHO


def main(addr: str, tag: str, partitions: int) -> int:
    builder = SparkSession.builder.master("local[2]").appName("reuse-off")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.config("spark.python.worker.reuse", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        udf = remote_udf(addr, WHO, header={"tag": tag})
        df = spark.range(1_000, numPartitions=partitions).select(
            "id", F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))
        rows = df.withColumn("echo", udf("s")).collect()
        bad = [r for r in rows if r["echo"] != r["s"]]
        print(f"rows={len(rows)} bad={len(bad)}")
        return 0 if len(rows) == 1_000 and not bad else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
