"""The library's logger. We never configure structlog; the application does (docs/logging.md)."""

from __future__ import annotations

from typing import Any

import structlog

log: Any = structlog.get_logger("remoting")
