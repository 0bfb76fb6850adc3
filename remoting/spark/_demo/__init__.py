"""The demo behind ``remoting demo`` (and ``make demo``): a scoring service and the local Spark
job that calls it. Shipped in the package, so an installed wheel runs it as a checkout does."""

from __future__ import annotations

from ._job import run_demo as run_demo

__all__ = ["run_demo"]
