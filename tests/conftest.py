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
    loggers = [logging.getLogger("remoting"), logging.getLogger()]
    saved_loggers = [(log, list(log.handlers), log.level, log.propagate) for log in loggers]
    saved = structlog.get_config()
    yield
    for log, handlers, level, propagate in saved_loggers:
        log.handlers[:] = handlers
        log.setLevel(level)
        log.propagate = propagate
    structlog.configure(**saved)
