"""`Permits`: bounded in-flight calls of the trio driver (RocketMQ's ``semaphoreAsync`` /
``semaphoreOneway``; the thread driver's are `ThreadPermits`).

Loop thread only. A permit given back while calls wait is handed to the first of them
directly (first come, first served), so a waiting call cannot be overtaken by a new one.
"""

from __future__ import annotations

import trio

__all__ = ["Permits"]


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
