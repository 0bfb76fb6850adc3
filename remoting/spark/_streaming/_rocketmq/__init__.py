"""Spark Structured Streaming over RocketMQ: the ``rocketmq`` data source (a streaming and
batch source, a streaming and batch sink), registered by `register_data_source` beside the
queue service's ``remoting`` format. See docs/spark.md, "RocketMQ"."""

from __future__ import annotations

from ._reading import RocketMQMessagesLostError as RocketMQMessagesLostError

__all__ = ["RocketMQMessagesLostError"]
