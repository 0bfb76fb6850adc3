"""OpenTelemetry for RocketMQ clients (imported only when OpenTelemetry is installed).

A producer makes a PRODUCER span per send (``send orders``; a batch is one span with
``messaging.batch.message_count``) and writes its context into the message's properties
(``traceparent``, ``tracestate``), which Java consumers see as ordinary properties; the
transport's CLIENT span for the SEND_MESSAGE_V2 call nests under it. A push consumer makes a
CONSUMER span (``process orders``) per handler run, child of the context the message carries,
so one trace goes from the sender to the handler. With a meter provider, the meter
``remoting.rocketmq`` counts ``messaging.client.sent.messages`` (by topic and outcome) and
``messaging.client.consumed.messages`` (by topic, group and outcome), and records each
handler run in ``messaging.process.duration``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._observability._otel_metrics import DURATION_BUCKETS, PerProvider
from .._observability._telemetry import configured, follows_parent
from .._observability._w3c import extract, inject
from .._version import __version__

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.metrics import Counter, Histogram
    from opentelemetry.trace import Span, Tracer

    from .._config import ClientConfig
    from ._message import Message

__all__ = ["OtelTelemetry", "otel_telemetry"]

SYSTEM: Final = "rocketmq"  # messaging.system (OpenTelemetry's registered value)
_NOTHING: Final = nullcontext()
class _Instruments:
    def __init__(self, meter_provider: Any) -> None:
        meter = metrics.get_meter("remoting.rocketmq", __version__, meter_provider)
        self.sent: Counter = meter.create_counter(
            "messaging.client.sent.messages", "{message}",
            "Messages a RocketMQ producer of this process sent, by topic and outcome.")
        self.consumed: Counter = meter.create_counter(
            "messaging.client.consumed.messages", "{message}",
            "Messages this process's RocketMQ consumers handled, by topic, group and outcome.")
        self.process_duration: Histogram = meter.create_histogram(
            "messaging.process.duration", unit="s",
            description="Time a RocketMQ handler of this process spent on a message.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)


_instruments: Final[PerProvider[_Instruments]] = PerProvider(_Instruments)


class _Send:
    """A send's PRODUCER span (if any) and its count by outcome (`SendTelemetry`)."""

    __slots__ = ("_attributes", "_counter", "_current", "_messages", "_span")

    def __init__(self, span: Span | None, counter: Counter | None, topic: str,
                 messages: int) -> None:
        self._span = span
        self._counter = counter
        self._messages = messages
        self._attributes = {"messaging.system": SYSTEM, "messaging.destination.name": topic}
        self._current: AbstractContextManager[object] = _NOTHING

    def fields(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self._span is not None:
            inject(out, self._span)  # type: ignore[arg-type]
        return out

    def __enter__(self) -> object:
        if self._span is not None:
            self._current = trace.use_span(self._span, end_on_exit=False)
        return self._current.__enter__()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        self._current.__exit__(exc_type, exc, tb)
        self.end(exc)
        return None

    def end(self, error: BaseException | None) -> None:
        if self._counter is not None:
            attributes = dict(self._attributes)
            if error is not None:
                attributes["error.type"] = type(error).__qualname__
            self._counter.add(self._messages, attributes)
        if self._span is not None:
            if error is not None:
                self._span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
            self._span.end()


class _Processing:
    __slots__ = ("_attributes", "_histogram", "_span", "_start")

    def __init__(self, span: AbstractContextManager[object], histogram: Histogram | None,
                 topic: str, group: str) -> None:
        self._span = span
        self._histogram = histogram
        self._attributes = {"messaging.system": SYSTEM, "messaging.destination.name": topic,
                            "messaging.consumer.group.name": group}
        self._start = 0.0

    def __enter__(self) -> object:
        entered = self._span.__enter__()
        self._start = perf_counter()
        return entered

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        if self._histogram is not None:
            attributes = dict(self._attributes)
            if exc_type is not None:
                attributes["error.type"] = exc_type.__qualname__
            self._histogram.record(perf_counter() - self._start, attributes)
        return self._span.__exit__(exc_type, exc, tb)


class OtelTelemetry:
    """`RocketMQTelemetry` with OpenTelemetry: spans, metrics, or both."""

    def __init__(self, tracer: Tracer | None, instruments: _Instruments | None) -> None:
        self._tracer = tracer
        self._skip_unsampled = tracer is not None and follows_parent(tracer)
        self._instruments = instruments

    def sending(self, topic: str, messages: int, operation: str) -> _Send:
        span = None
        if self._tracer is not None:
            attributes: dict[str, Any] = {
                "messaging.system": SYSTEM, "messaging.operation.type": "send",
                "messaging.operation.name": operation, "messaging.destination.name": topic}
            if messages > 1:
                attributes["messaging.batch.message_count"] = messages
            span = self._tracer.start_span(f"{operation} {topic}", kind=SpanKind.PRODUCER,
                                           attributes=attributes)
        counter = self._instruments.sent if self._instruments is not None else None
        return _Send(span, counter, topic, messages)

    def processing(self, message: Message, group: str) -> AbstractContextManager[object]:
        histogram = (self._instruments.process_duration if self._instruments is not None
                     else None)
        span: AbstractContextManager[object] = _NOTHING
        if self._tracer is not None:
            parent = extract(message.properties)  # type: ignore[arg-type]
            skip = False
            if self._skip_unsampled and parent is not None:
                skip = not trace.get_current_span(parent).get_span_context().trace_flags.sampled
            if not skip:
                started = self._tracer.start_span(
                    f"process {message.topic}", context=parent, kind=SpanKind.CONSUMER,
                    attributes={"messaging.system": SYSTEM,
                                "messaging.operation.type": "process",
                                "messaging.destination.name": message.topic,
                                "messaging.consumer.group.name": group,
                                "messaging.message.id": message.msg_id,
                                "messaging.rocketmq.message.tag": message.tags or "",
                                "messaging.message.body.size": len(message.body)})
                span = trace.use_span(started, end_on_exit=True)
        if histogram is None and span is _NOTHING:
            return _NOTHING
        return _Processing(span, histogram, message.topic, group)

    def consumed(self, topic: str, group: str, count: int, failed: int) -> None:
        if self._instruments is None:
            return
        attributes = {"messaging.system": SYSTEM, "messaging.destination.name": topic,
                      "messaging.consumer.group.name": group}
        if count - failed:
            self._instruments.consumed.add(count - failed, attributes)
        if failed:
            self._instruments.consumed.add(failed, {**attributes, "error.type": "handler"})


def otel_telemetry(config: ClientConfig) -> OtelTelemetry | None:
    """Return the telemetry of a client with ``config``; None if neither a tracer nor a
    meter provider is configured (in the config, or globally)."""
    tracer = None
    if config.tracer_provider is not None or configured(trace.get_tracer_provider()):
        tracer = trace.get_tracer("remoting.rocketmq", __version__, config.tracer_provider)
    instruments = None
    if config.meter_provider is not None or configured(metrics.get_meter_provider()):
        instruments = _instruments.get(config.meter_provider)
    if tracer is None and instruments is None:
        return None
    return OtelTelemetry(tracer, instruments)
