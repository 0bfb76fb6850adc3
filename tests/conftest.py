"""Shared pytest configuration: hypothesis profiles, logging restored after each test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """Undo what a test (or the CLI it runs in-process) did to the library's loggers and to
    structlog's global config."""
    logger = logging.getLogger("remoting")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    saved = structlog.get_config()
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate
    structlog.configure(**saved)
