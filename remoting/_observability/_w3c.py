"""W3C trace context in ext fields: the configured propagator, or a quicker path for the default.

When the global propagator is OpenTelemetry's default (W3C trace context and W3C baggage),
``traceparent`` / ``tracestate`` are written and read here directly, which costs a third of
the generic path (a measurable share of a request); with baggage in play, or any other
propagator, the generic `opentelemetry.propagate` functions are used.

What a request carries comes from a peer, so before anything parses it:
- OpenTelemetry's propagator limits are applied (``traceparent`` 512 characters; ``tracestate``
  512 characters and 32 members, W3C Trace Context; ``baggage`` 8,192 bytes, 180 members of
  4,096 bytes, W3C Baggage as OpenTelemetry applies it; 512 characters for another
  propagator's fields), and a value with a character outside printable ASCII (which W3C
  headers never hold: a line break would forge a log line) is left out, as if absent.
- The quick path checks ``tracestate`` against the W3C member grammar itself, so
  OpenTelemetry is never handed an invalid one.
- While a request's context is extracted, the warnings OpenTelemetry's own propagators log
  (they quote the offending value) are dropped: no peer-supplied value reaches a log line.
"""

from __future__ import annotations

import logging
import re
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import baggage, propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from codec import ExtFields

__all__ = ["extract", "inject"]

_HEX: Final = frozenset("0123456789abcdef")
# OpenTelemetry's limits (TraceContextTextMapPropagator, W3CBaggagePropagator), from the W3C
# Trace Context and Baggage specifications; other propagators' fields (B3, Jaeger) are short.
TRACEPARENT_MAX_CHARS: Final = 512
TRACESTATE_MAX_CHARS: Final = 512
TRACESTATE_MAX_MEMBERS: Final = 32
BAGGAGE_MAX_BYTES: Final = 8192
BAGGAGE_MAX_MEMBERS: Final = 180
BAGGAGE_MAX_MEMBER_BYTES: Final = 4096
OTHER_FIELD_MAX_CHARS: Final = 512
_PRINTABLE: Final = re.compile(r"[\x20-\x7e]*")
# A tracestate list-member (W3C Trace Context, "tracestate Header"): key "=" value.
_TRACESTATE_MEMBER: Final = re.compile(
    r"(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
# Where OpenTelemetry's W3C propagators log what they refuse (quoting it).
_OTEL_LOGGERS: Final = ("opentelemetry.trace.span", "opentelemetry.trace.propagation.tracecontext",
                        "opentelemetry.baggage", "opentelemetry.baggage.propagation",
                        "opentelemetry.propagate", "opentelemetry.propagators.composite")
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
    """Return the context ``ext`` carries, or None (a new trace begins).

    Never logs, and never lets OpenTelemetry log, what the peer sent (module docstring).
    """
    header = ext.get("traceparent")
    if not header or len(header) > TRACEPARENT_MAX_CHARS:
        return None
    if not _is_default() or "baggage" in ext:
        try:
            with _quiet():
                return propagate.extract(ext, getter=_BOUNDED)
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
                          trace_state=_trace_state(state) if state else None)
    return trace.set_span_in_context(NonRecordingSpan(context))


def _trace_state(header: str) -> TraceState | None:
    """Return the `TraceState` of a ``tracestate`` value, or None if it breaks a W3C rule
    (too long, too many members, a member out of the grammar, a key twice), as
    OpenTelemetry's propagator would, but without logging the value."""
    if len(header) > TRACESTATE_MAX_CHARS:
        return None
    pairs: dict[str, str] = {}
    for member in header.split(","):
        member = member.strip(" \t")  # optional whitespace (RFC 9110, 5.6.3)
        if not member:
            continue
        if _TRACESTATE_MEMBER.fullmatch(member) is None:
            return None
        key, _, value = member.partition("=")
        if key in pairs or len(pairs) == TRACESTATE_MAX_MEMBERS:
            return None
        pairs[key] = value
    with _quiet():
        return TraceState(list(pairs.items()))


def _acceptable(key: str, value: str) -> bool:
    """Whether a propagator may see ``value`` of ext field ``key`` (the module's limits)."""
    if key == "baggage":
        if len(value) > BAGGAGE_MAX_BYTES or _PRINTABLE.fullmatch(value) is None:
            return False
        members = value.split(",")
        return (len(members) <= BAGGAGE_MAX_MEMBERS
                and all(len(m) <= BAGGAGE_MAX_MEMBER_BYTES for m in members))
    if key == "tracestate":
        return (len(value) <= TRACESTATE_MAX_CHARS and value.count(",") < TRACESTATE_MAX_MEMBERS
                and _PRINTABLE.fullmatch(value) is not None)
    limit = TRACEPARENT_MAX_CHARS if key == "traceparent" else OTHER_FIELD_MAX_CHARS
    return len(value) <= limit and _PRINTABLE.fullmatch(value) is not None


class _BoundedGetter(Getter["ExtFields"]):
    """Hands a propagator only the ext fields within the limits (`_acceptable`)."""

    def get(self, carrier: ExtFields, key: str) -> list[str] | None:
        value = carrier.get(key)
        if value is None or not _acceptable(key, value):
            return None
        return [value]

    def keys(self, carrier: ExtFields) -> list[str]:
        return list(carrier)


_BOUNDED: Final = _BoundedGetter()


class _PeerValueFilter(logging.Filter):
    """Drops what OpenTelemetry's propagators log while a request's context is extracted."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_EXTRACTING, "active", False)


_EXTRACTING: Final = threading.local()  # set while this thread extracts a peer's context
for _name in _OTEL_LOGGERS:
    logging.getLogger(_name).addFilter(_PeerValueFilter())


@contextmanager
def _quiet() -> Iterator[None]:
    """Keep OpenTelemetry's propagators from logging in this thread meanwhile."""
    previous = getattr(_EXTRACTING, "active", False)
    _EXTRACTING.active = True
    try:
        yield
    finally:
        _EXTRACTING.active = previous
