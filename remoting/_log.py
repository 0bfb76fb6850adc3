"""The library's loggers: structlog-shaped events, routed through the standard library.

The library never configures ``logging`` or structlog and never writes to stdout. It logs
through standard-library loggers named under ``remoting`` (``remoting``, ``remoting.spark``,
``remoting.cli``), so an application controls levels and handlers as for any other library,
and is quiet at info level by default (the standard library's last-resort handler shows
warnings and errors on stderr). Each record's message is the event as a dict (``event``, the
dotted name, plus key-value fields and the request context bound with
``structlog.contextvars``): a structlog application's ``structlog.stdlib.ProcessorFormatter``
receives it as a structured event, and a plain ``logging.Formatter`` prints it as
``event key=value ...``. A call below the logger's level costs one ``isEnabledFor``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Final

from structlog.contextvars import get_contextvars

__all__ = ["Event", "FirstOfEach", "Logger", "get_logger", "log"]

_DEBUG: Final = logging.DEBUG
_INFO: Final = logging.INFO
_WARNING: Final = logging.WARNING
_ERROR: Final = logging.ERROR


class Event(dict[str, Any]):
    """One event: a dict for structlog's ``ProcessorFormatter``; ``event key=value ...`` as text."""

    def __str__(self) -> str:
        fields = " ".join(f"{k}={v!r}" for k, v in self.items() if k not in ("event", "exc_info"))
        return f"{self.get('event')} {fields}" if fields else str(self.get("event"))


class Logger:
    """A structlog-style logger (``log.info("noun.verb", key=value)``) over a stdlib logger."""

    __slots__ = ("_context", "_logger")

    def __init__(self, logger: logging.Logger, context: dict[str, Any] | None = None) -> None:
        self._logger = logger
        self._context = context or {}

    @property
    def name(self) -> str:
        """The standard library logger's name."""
        return self._logger.name

    def bind(self, **fields: Any) -> Logger:
        """Return a logger that adds ``fields`` to every event."""
        return Logger(self._logger, {**self._context, **fields})

    def debug(self, event: str, **fields: Any) -> None:
        """Log ``event`` at debug level (per-frame detail)."""
        if self._logger.isEnabledFor(_DEBUG):
            self._emit(_DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """Log ``event`` at info level (lifecycle)."""
        if self._logger.isEnabledFor(_INFO):
            self._emit(_INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log ``event`` at warning level (a misbehaving peer, a timeout, a drop)."""
        if self._logger.isEnabledFor(_WARNING):
            self._emit(_WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """Log ``event`` at error level (an exception swallowed: pass ``exc_info``)."""
        if self._logger.isEnabledFor(_ERROR):
            self._emit(_ERROR, "error", event, fields)

    def critical(self, event: str, **fields: Any) -> None:
        """Log ``event`` at critical level (a part stopped working: pass ``exc_info``)."""
        self._emit(logging.CRITICAL, "critical", event, fields)

    def _emit(self, level: int, method: str, event: str, fields: dict[str, Any]) -> None:
        record = Event(get_contextvars())
        record.update(self._context)
        record.update(fields)
        record["event"] = event
        exc_info = fields.get("exc_info")
        # `_logger` and `_name` are how ProcessorFormatter knows a record came from structlog
        self._logger.log(level, record, exc_info=exc_info, stacklevel=3,
                         extra={"_logger": self._logger, "_name": method})


def get_logger(name: str = "remoting") -> Logger:
    """Return the logger for ``name`` (a standard library logger name under ``remoting``)."""
    return Logger(logging.getLogger(name))


log: Final = get_logger("remoting")


class FirstOfEach:
    """Tell the first time a peer gives each reason apart from its repeats, so that a
    misbehaving peer is logged once per reason, however often it repeats itself (every
    repeat is still answered; only the log is spared).

    ``peer`` and ``reason`` are any hashable values. Keys are kept for at most ``max_peers``
    peers (connections, or addresses); beyond, it starts over rather than grow, so a peer
    may then be logged once more. Thread-safe.
    """

    __slots__ = ("_lock", "_max_peers", "_seen")

    def __init__(self, max_peers: int = 4096) -> None:
        self._max_peers = max_peers
        self._seen: dict[object, set[object]] = {}
        self._lock = threading.Lock()

    def first(self, peer: object, reason: object) -> bool:
        """True the first time ``peer`` gives ``reason`` (then log it); False for a repeat."""
        with self._lock:
            reasons = self._seen.get(peer)
            if reasons is None:
                if len(self._seen) >= self._max_peers:
                    self._seen.clear()
                reasons = self._seen[peer] = set()
            elif reason in reasons:
                return False
            reasons.add(reason)
            return True

    def forget(self, peer: object) -> None:
        """``peer`` is gone (its connection closed): drop what was seen of it."""
        with self._lock:
            self._seen.pop(peer, None)
