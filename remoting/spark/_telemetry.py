"""Spark side of the telemetry: a span per Arrow batch, parent of that batch's call spans.

Theory of operation:
- On the driver, a UDF captures the trace context current when it is made (`driver_context`):
  the W3C ``traceparent``/``tracestate`` as a small dict that travels with the UDF.
- In a Python worker, ``worker_setup`` (a UDF option) runs once per process, before the
  worker's client starts: that is where an application configures the OpenTelemetry SDK of
  its executors. Then, if a tracer provider is configured there, each Arrow batch gets a
  ``remoting.spark.batch`` span (child of the driver's context, when there was one), current
  while its requests are sent, so the client's call spans nest under it.
- Without the ``otel`` extra, or without an SDK in the worker, a batch costs one check.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._observability._otel_setup import otel_available

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

__all__ = ["BatchSpan", "batch_span", "driver_context", "run_worker_setup"]

_setup_lock = threading.Lock()
_setups_done: set[tuple[str, str]] = set()


def run_worker_setup(setup: Callable[[], object] | None) -> None:
    """Run ``setup`` once in this process (keyed by its module and qualified name)."""
    if setup is None:
        return
    key = (getattr(setup, "__module__", "") or "", getattr(setup, "__qualname__", repr(setup)))
    if key in _setups_done:
        return
    with _setup_lock:
        if key not in _setups_done:
            setup()
            _setups_done.add(key)


def driver_context() -> dict[str, str] | None:
    """Return the current trace context as propagation fields, or None if there is none."""
    if not otel_available():
        return None
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


@dataclass(slots=True)
class BatchSpan:
    """What a batch reports on its span once sent."""

    rows: int = 0
    requests: int = 0
    errors: int = 0


@contextmanager
def batch_span(mode: str, code: int, batch_no: int, parent: Mapping[str, str] | None
               ) -> Iterator[BatchSpan]:
    """Trace one Arrow batch (if a tracer provider is configured in this process)."""
    report = BatchSpan()
    tracer = _tracer()
    if tracer is None:
        yield report
        return
    from opentelemetry import context, propagate, trace
    from opentelemetry.trace import Status, StatusCode

    parent_context = propagate.extract(parent) if parent else None
    span = tracer.start_span("remoting.spark.batch", context=parent_context, attributes={
        "remoting.spark.mode": mode, "rpc.method": str(code), "remoting.spark.batch": batch_no,
        "remoting.spark.partition": _partition()})
    token = context.attach(trace.set_span_in_context(span, parent_context))
    try:
        yield report
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, str(exc)))
        raise
    finally:
        context.detach(token)
        span.set_attributes({"remoting.spark.rows": report.rows,
                             "remoting.spark.requests": report.requests,
                             "remoting.spark.errors": report.errors})
        if report.errors and span.is_recording():
            span.set_status(Status(StatusCode.ERROR, f"{report.errors} rows failed"))
        span.end()


def _tracer() -> Any:
    """This process's tracer, if its tracer provider is configured (a check per batch: a
    worker may be set up by a later UDF than its first)."""
    if not otel_available():
        return None
    from opentelemetry import trace

    from .._observability._telemetry import configured
    from .._version import __version__

    provider = trace.get_tracer_provider()
    if not configured(provider):
        return None
    return trace.get_tracer("remoting.spark", __version__, provider)


def _partition() -> int:
    from pyspark import TaskContext

    task = TaskContext.get()
    return task.partitionId() if task is not None else -1
