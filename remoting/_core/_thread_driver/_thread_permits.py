"""`ThreadPermits`: bounded in-flight calls of the thread driver (RocketMQ's
``semaphoreAsync`` / ``semaphoreOneway``; the trio driver's are `Permits`).

Taken and given by any thread, under its own lock; a call without a free permit waits for
one until its deadline (not first come, first served).
"""

from __future__ import annotations

import threading
from time import monotonic

__all__ = ["ThreadPermits"]


class ThreadPermits:
    """`Permits` for the thread driver: taken and given by any thread; a call without a free
    permit waits for one until its deadline (not first come, first served)."""

    __slots__ = ("_free", "_ready", "total", "waiting")

    def __init__(self, total: int) -> None:
        self.total = total
        self._free = total
        self.waiting = 0  # threads waiting for a permit
        self._ready = threading.Condition(threading.Lock())

    @property
    def free(self) -> int:
        """Permits free now."""
        return self._free

    def try_take(self) -> bool:
        """Take a permit if one is free and nobody waits for it; True if taken."""
        with self._ready:
            if self._free and not self.waiting:
                self._free -= 1
                return True
            return False

    def try_take_many(self, wanted: int) -> int:
        """Take up to ``wanted`` free permits at once if nobody waits for one; return how
        many were taken (a batch's window: one lock hold, not one per request)."""
        with self._ready:
            if self.waiting or wanted <= 0:
                return 0
            taken = min(wanted, self._free)
            self._free -= taken
            return taken

    def take(self, deadline: float) -> bool:
        """Take a permit, waiting until ``deadline`` (`time.monotonic`) at most; True if taken."""
        with self._ready:
            if self._free and not self.waiting:
                self._free -= 1
                return True
            # while threads wait, try_take refuses newcomers, so a permit given back goes to
            # a waiter; which one wakes is the Condition's choice
            self.waiting += 1
            try:
                while not self._free:
                    remaining = deadline - monotonic()
                    if remaining <= 0:
                        return False
                    self._ready.wait(min(remaining, threading.TIMEOUT_MAX))
                self._free -= 1
                return True
            finally:
                self.waiting -= 1

    def give(self) -> None:
        """Give a permit back (any thread)."""
        with self._ready:
            self._free += 1
            if self.waiting:
                self._ready.notify()

    def give_many(self, count: int) -> None:
        """Give ``count`` permits back at once (any thread; a batch's spare ones)."""
        if count <= 0:
            return
        with self._ready:
            self._free += count
            if self.waiting:
                self._ready.notify(count)
