"""Shared pytest configuration: hypothesis profiles and quiet structlog."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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


@pytest.fixture(autouse=True)
def _structlog_config_restored() -> Iterator[None]:
    """Undo what a test (or the CLI it runs in-process) did to structlog's global config."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
