"""W3C trace context in ext fields: the configured propagator, or a quicker path for the default.

When the global propagator is OpenTelemetry's default (W3C trace context and W3C baggage),
``traceparent`` / ``tracestate`` are written and read here directly, which costs a third of
the generic path (a measurable share of a request); with baggage in play, or any other
propagator, the generic `opentelemetry.propagate` functions are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from opentelemetry import baggage, propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from codec import ExtFields

__all__ = ["extract", "inject"]

_HEX: Final = frozenset("0123456789abcdef")
_checked: list[Any] = [None, False]  # the global propagator last seen, and whether it is W3C's


def _is_default() -> bool:
    textmap = propagate.get_global_textmap()
    if textmap is not _checked[0]:
        parts = getattr(textmap, "_propagators", None)
        _checked[:] = [textmap, isinstance(textmap, CompositePropagator) and parts is not None
                       and [type(p) for p in parts] == [TraceContextTextMapPropagator,
                                                        W3CBaggagePropagator]]
    return bool(_checked[1])


def inject(ext: ExtFields, span: Span) -> None:
    """Write ``span``'s context (and the current baggage) into ``ext``."""
    if not _is_default() or baggage.get_all():
        propagate.inject(ext, trace.set_span_in_context(span))
        return
    ctx = span.get_span_context()
    ext["traceparent"] = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
    if ctx.trace_state:
        ext["tracestate"] = ctx.trace_state.to_header()


def extract(ext: ExtFields) -> Context | None:
    """Return the context ``ext`` carries, or None (a new trace begins)."""
    header = ext.get("traceparent")
    if not header:
        return None
    if not _is_default() or "baggage" in ext:
        try:
            return propagate.extract(ext)
        except Exception:  # a propagator that chokes on a hostile value: a new trace begins
            return None
    parts = header.split("-")
    if (len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff" or len(parts[1]) != 32
            or len(parts[2]) != 16 or len(parts[3]) != 2 or (parts[0] == "00" and len(parts) != 4)
            or not _HEX.issuperset(header.replace("-", ""))):
        return None  # as the W3C propagator: an invalid traceparent starts a new trace
    trace_id, span_id = int(parts[1], 16), int(parts[2], 16)
    if not trace_id or not span_id:
        return None
    state = ext.get("tracestate")
    context = SpanContext(trace_id, span_id, is_remote=True,
                          trace_flags=TraceFlags(int(parts[3], 16)),
                          trace_state=TraceState.from_header([state]) if state else None)
    return trace.set_span_in_context(NonRecordingSpan(context))
