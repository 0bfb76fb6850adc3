"""Which servers of a fleet a worker process should call now (bookkeeping only, no I/O).

A server that refused a connection, lost one, or stopped answering is *cooling down*: for
``cooldown`` seconds the worker process sends it nothing, so later batches do not each pay
the connect timeout or a request timeout again. When the cool-down ends the server is tried
again; an answer makes it healthy at once. When every address is cooling down, all of them
are tried anyway (in rotation): a job never stops calling because of the registry.

One registry serves a whole worker process (`COOLDOWNS`): every UDF, every batch and every
task thread of the process share what they learnt. Time is passed in (``now``), so the rules
are tested without sockets or sleeps.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final

from .._log import get_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["COOLDOWNS", "Cooldowns"]

log: Final = get_logger("remoting.spark")


class Cooldowns:
    """Addresses that failed recently, and until when each is skipped."""

    __slots__ = ("_lock", "_until")

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()  # task threads of one worker process share the registry

    def order(self, addresses: Sequence[str], first: int, now: float) -> list[str]:
        """Return the addresses to try, rotated to start at ``first``, cooling ones left out.

        If every address is cooling down, return them all (rotated): trying beats failing.
        """
        n = len(addresses)
        rotated = [addresses[(first + i) % n] for i in range(n)]
        with self._lock:
            healthy = [a for a in rotated if self._until.get(a, 0.0) <= now]
        return healthy or rotated

    def failed(self, addr: str, now: float, seconds: float, reason: str) -> None:
        """Skip ``addr`` for ``seconds`` from ``now``; log when it starts cooling down."""
        with self._lock:
            was_cooling = self._until.get(addr, 0.0) > now
            self._until[addr] = now + seconds
        if not was_cooling:
            log.warning("server.cooling_down", addr=addr, seconds=seconds, reason=reason)

    def answered(self, addr: str) -> None:
        """Mark ``addr`` healthy again (it answered); log if it had been cooling down."""
        with self._lock:
            recovered = self._until.pop(addr, None) is not None
        if recovered:
            log.info("server.recovered", addr=addr)

    def cooling(self, now: float) -> list[str]:
        """Return the addresses cooling down at ``now``."""
        with self._lock:
            return sorted(a for a, until in self._until.items() if until > now)

    def clear(self) -> None:
        """Forget every failure."""
        with self._lock:
            self._until.clear()


COOLDOWNS: Final = Cooldowns()
