"""Runnable examples: a processor factory for ``remoting serve`` (`echo_service`), a job that
calls a fleet of servers from a Spark cluster (`cluster_job`), shipping code to Spark executors
(`shipping`) and the trace picture of docs/observability.md (`trace_picture`). The demo of
``remoting demo`` is in the package (``remoting/spark/_demo/``), so an installed wheel runs it.
"""
