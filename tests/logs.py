"""Capturing the library's log events in tests, through the standard library as applications do."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, dict):  # one of our events
            event = dict(record.msg)
            event["log_level"] = record.levelname.lower()
            event["logger"] = record.name
            self.events.append(event)


@contextmanager
def capture_logs(name: str = "remoting") -> Iterator[list[dict[str, Any]]]:
    """Collect the events logged under ``name`` meanwhile, every level, as dicts (with their
    ``log_level``), the way structlog's ``capture_logs`` presents them."""
    logger = logging.getLogger(name)
    collector = _Collector()
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(collector)
    try:
        yield collector.events
    finally:
        logger.removeHandler(collector)
        logger.setLevel(level)
