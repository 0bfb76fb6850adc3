"""Whether a bus reports to OpenTelemetry, and the stand-in that reports nothing.

As for calls (docs/observability.md): a bus makes spans and records metrics when the ``otel``
extra is installed, the endpoint's config allows it (``telemetry=True``) and a tracer or meter
provider is configured (the config's, or a global one), checked when the bus is made. Without
that, nothing here imports OpenTelemetry and a message pays two no-op context managers.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Final, Literal, Protocol

from .._observability._otel_setup import otel_available

if TYPE_CHECKING:
    from .._config import ClientConfig, ServerConfig
    from ._message import Message, OutboundMessage
    from ._metrics import ReportedBus

__all__ = ["NO_TELEMETRY", "BusTelemetry", "telemetry_for"]

_NOTHING: Final = nullcontext()


class BusTelemetry(Protocol):
    """A span around each message sent; a span and a duration around each handler run."""

    def sending(self, message: OutboundMessage) -> AbstractContextManager[object]:
        """A PRODUCER span while ``message`` is sent; its context goes into its headers."""
        ...

    def processing(self, message: Message) -> AbstractContextManager[object]:
        """A CONSUMER span while a handler runs, child of the context ``message`` carries,
        and the run's duration recorded."""
        ...


class _NoTelemetry:
    def sending(self, message: OutboundMessage) -> AbstractContextManager[object]:
        return _NOTHING

    def processing(self, message: Message) -> AbstractContextManager[object]:
        return _NOTHING


NO_TELEMETRY: Final = _NoTelemetry()


def telemetry_for(config: ClientConfig | ServerConfig, node: ReportedBus,
                  role: Literal["server", "client"]) -> BusTelemetry:
    """Return the telemetry of a bus (``node``) over an endpoint with ``config``, reported
    under ``remoting.role`` ``role`` (`NO_TELEMETRY`: none)."""
    if not config.telemetry or not otel_available():
        return NO_TELEMETRY
    from ._otel import otel_telemetry

    return otel_telemetry(config, node, role) or NO_TELEMETRY
