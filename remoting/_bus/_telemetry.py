"""Whether a bus makes OpenTelemetry spans, and the stand-in that makes none.

As for calls (docs/observability.md): a bus makes spans when the ``otel`` extra is installed,
the endpoint's config allows it (``telemetry=True``) and a tracer provider is configured (the
config's, or a global one), checked when the bus is made. Without that, nothing here imports
OpenTelemetry and a message pays two no-op context managers.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Final, Protocol

from .._observability._otel_setup import otel_available

if TYPE_CHECKING:
    from .._config import ClientConfig, ServerConfig
    from ._message import Message, OutboundMessage

__all__ = ["NO_SPANS", "Spans", "spans_for"]

_NOTHING: Final = nullcontext()


class Spans(Protocol):
    """A span around each message sent, and around each handler run."""

    def sending(self, message: OutboundMessage) -> AbstractContextManager[object]:
        """A PRODUCER span while ``message`` is sent; its context goes into its headers."""
        ...

    def processing(self, message: Message) -> AbstractContextManager[object]:
        """A CONSUMER span while a handler runs, child of the context ``message`` carries."""
        ...


class _NoSpans:
    def sending(self, message: OutboundMessage) -> AbstractContextManager[object]:
        return _NOTHING

    def processing(self, message: Message) -> AbstractContextManager[object]:
        return _NOTHING


NO_SPANS: Final = _NoSpans()


def spans_for(config: ClientConfig | ServerConfig) -> Spans:
    """Return the spans a bus over an endpoint with ``config`` makes (`NO_SPANS`: none)."""
    if not config.telemetry or not otel_available():
        return NO_SPANS
    from ._spans import tracer_spans

    return tracer_spans(config.tracer_provider) or NO_SPANS
