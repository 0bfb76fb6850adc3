"""The demos behind ``remoting demo`` (and ``make demo``): a scoring service and the local Spark
job that calls it; with ``--stream``, a queue service, a producer and a streaming query.
Shipped in the package, so an installed wheel runs them as a checkout does."""

from __future__ import annotations

from ._job import run_demo as run_demo
from ._stream import run_stream_demo as run_stream_demo

__all__ = ["run_demo", "run_stream_demo"]
