"""OpenTelemetry spans of bus messages (imported only when OpenTelemetry is installed).

The sender makes a PRODUCER span per message (``send orders``, ``publish orders``, ``request
orders``, ``reply``) while it is sent, and writes its context into the message's headers
(``traceparent``, ``tracestate``: handlers see them, as in Vert.x's tracing); the transport's
CLIENT span for the call nests under it. A consumer makes a CONSUMER span (``process
orders``) while its handler runs, child of the context the message carries, so one trace
goes from the sender through the bus server to the handler, and on to the replies.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from .._observability._telemetry import configured, follows_parent
from .._observability._w3c import extract, inject
from .._version import __version__

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from ._message import Message, OutboundMessage

__all__ = ["SYSTEM", "TracerSpans", "tracer_spans"]

SYSTEM: Final = "remoting.bus"  # messaging.system
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
