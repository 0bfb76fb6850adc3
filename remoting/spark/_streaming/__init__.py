"""Spark Structured Streaming over the queue service and RocketMQ: the ``remoting`` data
source (a streaming and batch source, a streaming sink), the ``rocketmq`` one (`_rocketmq`)
and the helper that decodes message bodies.

The data source needs PySpark 4.2+ (its Python streaming API with admission control); it is
imported when `register_data_source` is called, so ``import remoting.spark`` works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._bodies import decode_bodies as decode_bodies
from ._reading import MessagesLostError as MessagesLostError
from ._rocketmq import RocketMQMessagesLostError as RocketMQMessagesLostError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MessagesLostError", "RocketMQMessagesLostError", "decode_bodies",
           "register_data_source"]

MINIMUM_PYSPARK = (4, 2)


def register_data_source(spark: SparkSession) -> None:
    """Register the ``remoting`` and ``rocketmq`` data sources with ``spark`` (a
    `SparkSession`): then ``spark.readStream.format("remoting")``,
    ``spark.read.format("remoting")`` and ``df.writeStream.format("remoting")`` work in it,
    and the same with ``"rocketmq"`` (plus ``df.write.format("rocketmq")``). Calling it
    again is harmless.

    Spark plans and reads the source in its Python workers, which must be able to import
    this package: on a local master whose workers' interpreter (``PYSPARK_PYTHON``) cannot,
    they are pointed at this interpreter (logged as ``spark.python_workers_set``).

    Raises:
        ImportError: PySpark is older than 4.2 (the message says which is installed), or
            the workers' interpreter of a master that is not local cannot import this
            package (the message says what to set).
    """
    import pyspark

    version = tuple(int(p) for p in pyspark.__version__.split(".")[:2] if p.isdigit())
    if version < MINIMUM_PYSPARK:
        raise ImportError(f"the remoting data source needs PySpark 4.2 or later (its streaming "
                          f"API with admission control); this is {pyspark.__version__}: "
                          "pip install 'pyspark>=4.2'")
    from .._python_workers import check_python_workers
    from ._rocketmq._source import RocketMQDataSource
    from ._source import QueueDataSource

    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect has none here: its server starts the workers
        context = None
    if context is not None:
        check_python_workers(context)
    spark.dataSource.register(QueueDataSource)
    spark.dataSource.register(RocketMQDataSource)
