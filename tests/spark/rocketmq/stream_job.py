"""A streaming query of a RocketMQ topic in a process of its own, for a test to SIGKILL:

    python -m tests.spark.rocketmq.stream_job NAME_SERVERS TOPIC CHECKPOINT OUTPUT MAX

It reads TOPIC from the earliest offsets into a Parquet file sink at OUTPUT, with its
checkpoint at CHECKPOINT and ``maxMessagesPerTrigger`` MAX, and prints ``batch <id> <rows>``
once each batch is committed, until it is killed.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from remoting.spark import register_data_source

from ..conftest import SPARK_CONF
from ..streaming.stream_job import Say


def main() -> int:
    name_servers, topic, checkpoint, output, max_per_trigger = sys.argv[1:6]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName("rocketmq-stream-job")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    spark.streams.addListener(Say())
    query = (spark.readStream.format("rocketmq").option("nameServers", name_servers)
             .option("topic", topic).option("startingOffsets", "earliest")
             .option("maxMessagesPerTrigger", max_per_trigger).load()
             .writeStream.format("parquet").option("path", output)
             .option("checkpointLocation", checkpoint).start())
    print("started", flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
