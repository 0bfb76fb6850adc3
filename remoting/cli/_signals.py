"""SIGTERM and SIGINT as a stop request for the long-running commands (serve, queue, bus)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["stopped_by_signals"]


@contextmanager
def stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGINT set ``stop``; after it, the handlers they
    replaced are back (a program that calls ``main(["serve", ...])`` keeps its own Ctrl-C).

    Python takes signal handlers in the main thread only: from another thread this does
    nothing, and ``stop`` is the way to end the command.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
