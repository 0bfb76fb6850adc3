"""OpenTelemetry for bus messages: spans, and the handler-duration histogram (imported only
when OpenTelemetry is installed; the other metrics are `_metrics`).

The sender makes a PRODUCER span per message (``send orders``, ``publish orders``, ``request
orders``, ``reply``) while it is sent, and writes its context into the message's headers
(``traceparent``, ``tracestate``: handlers see them, as in Vert.x's tracing); the transport's
CLIENT span for the call nests under it. A consumer makes a CONSUMER span (``process
orders``) while its handler runs, child of the context the message carries, so one trace
goes from the sender through the bus server to the handler, and on to the replies.

With a meter provider, each handler run is also recorded in ``messaging.process.duration``
(seconds, by address and kind, with ``error.type`` when it raised), and the bus is reported
in the observable counters and gauges of `_metrics`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind

from .._observability._telemetry import configured, follows_parent
from .._observability._w3c import extract, inject
from .._version import __version__
from ._metrics import SYSTEM, bus_instruments

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Tracer

    from .._config import ClientConfig, ServerConfig
    from ._message import Message, OutboundMessage
    from ._metrics import ReportedBus

__all__ = ["OtelTelemetry", "TracerSpans", "otel_telemetry", "tracer_spans"]

_NOTHING: Final = nullcontext()


class TracerSpans:
    """Spans of bus messages from one tracer."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._skip_unsampled = follows_parent(tracer)

    def sending(self, message: OutboundMessage) -> AbstractContextManager[object]:
        headers: Any = message.headers
        if self._skip_unsampled:
            parent = trace.get_current_span()
            context = parent.get_span_context()
            if context.is_valid and not context.trace_flags.sampled:
                inject(headers, parent)  # the unsampled parent's context travels on
                return _NOTHING
        reply = message.kind in ("reply", "fail")
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "send",
            "messaging.operation.name": message.kind,
            "messaging.message.body.size": len(message.body)}
        if not reply:  # a reply address is generated: no name for a span or a destination
            attributes["messaging.destination.name"] = message.address
        span = self._tracer.start_span("reply" if reply else f"{message.kind} {message.address}",
                                       kind=SpanKind.PRODUCER, attributes=attributes)
        inject(headers, span)
        return trace.use_span(span, end_on_exit=True)

    def processing(self, message: Message) -> AbstractContextManager[object]:
        parent = extract(message.headers) if message.headers else None  # type: ignore[arg-type]
        if self._skip_unsampled and parent is not None:
            remote = trace.get_current_span(parent)
            if not remote.get_span_context().trace_flags.sampled:
                return _NOTHING
        span = self._tracer.start_span(
            f"process {message.address}", context=parent, kind=SpanKind.CONSUMER,
            attributes={"messaging.system": SYSTEM, "messaging.operation.type": "process",
                        "messaging.operation.name": message.kind,
                        "messaging.destination.name": message.address,
                        "messaging.message.body.size": len(message.body)})
        return trace.use_span(span, end_on_exit=True)


def tracer_spans(tracer_provider: Any) -> TracerSpans | None:
    """Return the spans of ``tracer_provider`` (None: the global one), or None if neither
    is configured."""
    if tracer_provider is None and not configured(trace.get_tracer_provider()):
        return None
    return TracerSpans(trace.get_tracer("remoting.bus", __version__, tracer_provider))


class _Timed:
    """A handler run: its span (if any) and its duration, recorded on the way out."""

    __slots__ = ("_histogram", "_message", "_span", "_start")

    def __init__(self, span: AbstractContextManager[object], histogram: Histogram,
                 message: Message) -> None:
        self._span = span
        self._histogram = histogram
        self._message = message
        self._start = 0.0

    def __enter__(self) -> object:
        entered = self._span.__enter__()
        self._start = perf_counter()
        return entered

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        elapsed = perf_counter() - self._start
        message = self._message
        attributes = {"messaging.system": SYSTEM, "messaging.operation.name": message.kind,
                      "messaging.destination.name": message.address}
        if exc_type is not None:
            attributes["error.type"] = exc_type.__qualname__
        self._histogram.record(elapsed, attributes)
        return self._span.__exit__(exc_type, exc, tb)


class OtelTelemetry:
    """`BusTelemetry` with OpenTelemetry: spans, a histogram of handler runs, or both."""

    def __init__(self, spans: TracerSpans | None, histogram: Histogram | None) -> None:
        self._spans = spans
        self._histogram = histogram

    def sending(self, message: OutboundMessage) -> AbstractContextManager[object]:
        return _NOTHING if self._spans is None else self._spans.sending(message)

    def processing(self, message: Message) -> AbstractContextManager[object]:
        span = _NOTHING if self._spans is None else self._spans.processing(message)
        if self._histogram is None:
            return span
        return _Timed(span, self._histogram, message)


def otel_telemetry(config: ClientConfig | ServerConfig, node: ReportedBus, role: str
                   ) -> OtelTelemetry | None:
    """Return the telemetry of a bus (``node``, of ``role``) over an endpoint with
    ``config``, reporting it in the metrics from now on; None if neither a tracer nor a meter
    provider is configured (in the config, or globally)."""
    spans = tracer_spans(config.tracer_provider)
    meter_provider = config.meter_provider
    histogram = None
    if meter_provider is not None or configured(metrics.get_meter_provider()):
        instruments = bus_instruments(meter_provider)
        instruments.observe(node, role)
        histogram = instruments.process_duration
    if spans is None and histogram is None:
        return None
    return OtelTelemetry(spans, histogram)
