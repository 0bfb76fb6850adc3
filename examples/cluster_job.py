"""A Spark job for a cluster: echo ``--rows`` strings through a fleet of servers, check each.

Start servers with ``remoting serve examples.echo_service:processors --port 9876`` (code 1
echoes), then submit this file as docs/spark.md ("Running on a cluster") shows::

    spark-submit --master spark://HOST:7077 \\
        --archives executor-env.tar.gz#environment --py-files job-code.zip \\
        examples/cluster_job.py --addresses h1:9876,h2:9876 --rows 100000

Exits 0 when every row came back equal to what was sent.
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from remoting.spark import remote_udf

ECHO = 1  # examples.echo_service: code 1 echoes on a thread pool


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--addresses", required=True, help="host:port,host:port,...")
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    spark = SparkSession.builder.appName("trio-remoting cluster job").getOrCreate()
    try:
        echo = remote_udf(args.addresses, ECHO, idempotent=True)  # echoing twice is harmless
        df = spark.range(args.rows).select(F.concat(F.lit("row-"), F.col("id")).alias("s"))
        wrong = df.where(echo("s") != F.col("s")).count()
        print(f"{args.rows:,} rows echoed through {args.addresses}: {wrong} wrong")
        return 0 if wrong == 0 else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
