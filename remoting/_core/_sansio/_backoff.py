"""`busy_backoff`: how long ``retry_busy`` waits before resending after SYSTEM_BUSY (both
drivers)."""

from __future__ import annotations

import random
from typing import Final

__all__ = ["BUSY_BACKOFF_FIRST", "BUSY_BACKOFF_MAX", "busy_backoff"]

BUSY_BACKOFF_FIRST: Final = 0.01  # seconds; doubles up to BUSY_BACKOFF_MAX, with jitter
BUSY_BACKOFF_MAX: Final = 0.2


def busy_backoff(attempt: int) -> float:
    """Return the pause before retry number ``attempt`` (1-based) of a SYSTEM_BUSY reply."""
    base: float = min(BUSY_BACKOFF_MAX, BUSY_BACKOFF_FIRST * 2.0 ** (attempt - 1))
    # jitter: callers turned away by one busy server together do not all come back together
    return base * random.uniform(0.5, 1.0)
