"""How the ``remoting`` command renders the library's events: it is an application, so it
configures logging (the library never does)."""

from __future__ import annotations

import logging
import sys
from typing import Final, Literal

import structlog

__all__ = ["LEVELS", "configure_logging"]

LEVELS: Final = ("debug", "info", "warning", "error")
_MARK: Final = "_remoting_cli_handler"  # on the handler this module installs


def configure_logging(level: str, fmt: Literal["console", "json"]) -> None:
    """Render events of the ``remoting`` loggers at ``level`` and above on stderr.

    ``console``: one readable line per event; ``json``: one JSON object per line. Replaces
    the handler a previous call installed (commands may run in one process, as in tests).
    """
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
        exceptions: list[structlog.typing.Processor] = [structlog.processors.dict_tracebacks]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        exceptions = []
    formatter = structlog.stdlib.ProcessorFormatter(processors=[
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        *exceptions,
        renderer,
    ])
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    setattr(handler, _MARK, True)
    logger = logging.getLogger("remoting")
    for old in [h for h in logger.handlers if getattr(h, _MARK, False)]:
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False  # rendered here, once
