"""A streaming query in a process of its own, for a test to SIGKILL mid-stream:

    python -m tests.spark.streaming.stream_job ADDR TOPIC CHECKPOINT OUTPUT MAX_PER_TRIGGER

It reads TOPIC from the earliest offset into a Parquet file sink at OUTPUT, with its
checkpoint at CHECKPOINT and ``maxMessagesPerTrigger``, and prints ``batch <id> <rows>`` once
each batch is committed, until it is killed.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener

from remoting.spark import register_data_source

from ..conftest import SPARK_CONF


class Say(StreamingQueryListener):
    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (pyspark's)
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        progress = json.loads(event.progress.json)
        print(f"batch {progress['batchId']} {progress['numInputRows']}", flush=True)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        print(f"terminated {event.exception}", flush=True)


def main() -> int:
    addr, topic, checkpoint, output, max_per_trigger = sys.argv[1:6]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName("stream-job")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    spark.streams.addListener(Say())
    query = (spark.readStream.format("remoting").option("addresses", addr)
             .option("topic", topic).option("startingOffsets", "earliest")
             .option("maxMessagesPerTrigger", max_per_trigger).option("group", "exports")
             .load()
             .writeStream.format("parquet").option("path", output)
             .option("checkpointLocation", checkpoint).start())
    print("started", flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
