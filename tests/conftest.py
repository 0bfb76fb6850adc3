"""Shared pytest configuration: hypothesis profiles and quiet structlog."""

from __future__ import annotations

import structlog
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci")


def _drop(_logger: object, _name: str, _event: dict[str, object]) -> dict[str, object]:
    raise structlog.DropEvent


# The library never configures structlog; the tests silence it (capture_logs still works,
# because it swaps the processor chain for the duration of a block).
structlog.configure(processors=[_drop], cache_logger_on_first_use=False)
