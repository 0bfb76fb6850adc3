"""Turning OpenTelemetry on for an endpoint, when the ``otel`` extra is installed and the
application configured a tracer or meter provider (globally, or in the endpoint's config).

Nothing here imports OpenTelemetry unless it is installed and asked for: without it, an
endpoint pays one check when it starts and nothing per call.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._core._endpoint import Endpoint

__all__ = ["install_telemetry"]

_available: bool | None = None


def otel_available() -> bool:
    """True if ``opentelemetry-api`` can be imported."""
    global _available
    if _available is None:
        _available = find_spec("opentelemetry") is not None and (
            find_spec("opentelemetry.trace") is not None)
    return _available


def install_telemetry(endpoint: Endpoint) -> bool:
    """Register the `Telemetry` interceptor on ``endpoint`` if OpenTelemetry is configured;
    return True if it was (or already is)."""
    config = endpoint.config
    if endpoint.telemetry_installed:
        return True
    if not config.telemetry or not otel_available():
        return False
    from ._telemetry import telemetry_for

    telemetry = telemetry_for(endpoint, config.tracer_provider, config.meter_provider)
    if telemetry is None:
        return False
    endpoint.caller.add(telemetry, innermost=True)
    endpoint.dispatcher.register_interceptor(telemetry, outermost=True)
    endpoint.telemetry_installed = True
    return True
