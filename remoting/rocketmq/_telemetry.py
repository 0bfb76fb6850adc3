"""Whether a RocketMQ client reports to OpenTelemetry, and what it reports.

As for calls and the bus (docs/observability.md): spans and metrics when the ``otel`` extra
is installed, the client's config allows it (``telemetry=True``) and a tracer or meter
provider is configured (the config's, or a global one), checked when the client is made.
Without that a client has no telemetry object at all (None) and pays one ``is None`` test
per send and per batch of messages handled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .._observability._otel_setup import otel_available

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from types import TracebackType

    from .._config import ClientConfig
    from ._message import Message

__all__ = ["NO_SPAN", "RocketMQTelemetry", "SendTelemetry", "telemetry_of"]


class _NoSpan:
    """What a client without telemetry has for a send or a handler run."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

    def fields(self) -> dict[str, str]:
        return {}

    def end(self, error: BaseException | None) -> None:
        return None


NO_SPAN = _NoSpan()


class SendTelemetry(Protocol):
    """One send's span and count: entered around a send that waits (its span current), or
    ended by `end` (``send_async``: in a callback thread; never made current)."""

    def fields(self) -> dict[str, str]:
        """Return the trace context of the send's span, for the message's properties."""
        ...

    def __enter__(self) -> object: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None: ...

    def end(self, error: BaseException | None) -> None:
        """End the send's span (and count it) with its error, or None."""
        ...


class RocketMQTelemetry(Protocol):
    """Spans around sends and handler runs; counters of messages."""

    def sending(self, topic: str, messages: int, operation: str) -> SendTelemetry:
        """Start a PRODUCER span for a send of ``messages`` messages (not yet current)."""
        ...

    def processing(self, message: Message, group: str) -> AbstractContextManager[object]:
        """A CONSUMER span while a handler runs, child of the context the message carries;
        its duration recorded."""
        ...

    def consumed(self, topic: str, group: str, count: int, failed: int) -> None:
        """Count messages handled (``failed`` of them raised)."""
        ...


def telemetry_of(config: ClientConfig) -> RocketMQTelemetry | None:
    """Return the telemetry of a RocketMQ client with ``config``, or None (none configured)."""
    if not config.telemetry or not otel_available():
        return None
    from ._otel import otel_telemetry

    return otel_telemetry(config)
