"""Bounded in-flight calls (RocketMQ's ``semaphoreAsync`` / ``semaphoreOneway``), one class
per driver.

`Permits` (trio driver): loop thread only. A permit given back while calls wait is handed to
the first of them directly (first come, first served), so a waiting call cannot be overtaken
by a new one. `ThreadPermits` (thread driver): any thread, under its own lock.
"""

from __future__ import annotations

import threading
from time import monotonic

import trio

from ..._errors import RemotingTooManyRequestsError

__all__ = ["Permits", "ThreadPermits", "batch_got_no_permit"]


class Permits:
    """A counter of free permits and a queue of calls waiting for one."""

    __slots__ = ("_lot", "free", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self._lot = trio.lowlevel.ParkingLot()

    @property
    def waiting(self) -> int:
        """Calls waiting for a permit."""
        return len(self._lot)

    def try_take(self) -> bool:
        """Take a permit if one is free and nobody waits for it; True if taken."""
        if self.free and not self._lot:
            self.free -= 1
            return True
        return False

    async def take(self, deadline: float) -> bool:
        """Take a permit, waiting until ``deadline`` at most; True if taken."""
        if self.try_take():
            return True
        # wait within the call's deadline, as RocketMQ's invokeAsyncImpl does with
        # semaphoreAsync.tryAcquire(timeoutMillis)
        with trio.move_on_at(deadline):
            await self._lot.park()  # `give` hands its permit over: `free` is unchanged
            return True
        return False

    def give(self) -> None:
        """Give a permit back: to the first waiting call, else to the free count."""
        if self._lot:
            # handed over, not freed: a new call's try_take cannot take it before the waiter
            # that has waited longest runs
            self._lot.unpark()
        else:
            self.free += 1


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


def batch_got_no_permit(timeout: float, addr: str | None) -> RemotingTooManyRequestsError:
    """The error of an ``invoke_many``'s requests that got no in-flight permit within
    ``timeout`` (either driver)."""
    return RemotingTooManyRequestsError(
        f"no in-flight permit within {timeout}s for a batch request: other calls hold them "
        "all; slow down or raise client_async_semaphore_value", addr)
