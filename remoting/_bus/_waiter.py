"""Where the bus's thread faces and trio faces differ: how they wait. Everything else of the
bus is written once, as steps (remoting/_steps.py); these are its own steps.

Waiters: one outcome (a reply, a failure, or a receipt), read by the one thread or trio task
that waits for it. A waiter is completed once, by whoever removed the entry it waits on, while
holding the bus lock: so a waiter that gives up (its deadline passed) and then takes the lock
either finds its entry still there (and completes it itself, with TIMEOUT) or finds its
outcome set. A thread waits on a lock (`ThreadWaiter`); a trio task on an event of its own loop
(`TaskWaiter`), set there even when another thread completes it. ``yield waiter.until(deadline)``
is the step that waits (its result: True if completed). An `Answer` is waited on by nobody in
this process: a bus server writes its outcome to the client that asked (whoever completed it
sends it once the lock is let go; `send_answers`), and the server's timer answers it at its
deadline.
"""

from __future__ import annotations

import _thread
import threading
from contextlib import nullcontext
from time import monotonic
from typing import TYPE_CHECKING, Final, Self, TypeAlias

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._failure import ReplyFailure
    from ._message import Message

__all__ = ["DELIVERED", "RUNG", "Answer", "Outcome", "TaskWaiter", "ThreadWaiter", "Waiter",
           "send_answers"]

DELIVERED: Final = "delivered"  # a send's outcome: the consumer's bus has the message
RUNG: Final = "rung"  # a nap's outcome: woken before its time
Outcome: TypeAlias = "Message | ReplyFailure | str"


class _Waiter:
    """What both waiters share: the outcome, and the step that waits for it."""

    __slots__ = ("_deadline", "outcome")

    def __init__(self) -> None:
        self._deadline: float | None = None
        self.outcome: Outcome | None = None

    def until(self, deadline: float | None) -> Self:
        """Return the step that waits for the outcome until ``deadline`` (`time.monotonic`;
        None: no limit); its result is True if the outcome came."""
        self._deadline = deadline
        return self

    def run(self) -> bool:
        raise RuntimeError(f"a {type(self).__name__} is waited on in a trio task only")

    def run_async(self) -> Awaitable[bool]:
        raise RuntimeError(f"a {type(self).__name__} is waited on in a thread only")


class ThreadWaiter(_Waiter):
    """A waiter for a thread (blocking faces)."""

    __slots__ = ("_signal",)

    def __init__(self) -> None:
        super().__init__()
        self._signal = _thread.allocate_lock()
        self._signal.acquire()

    def run(self) -> bool:
        return self.wait(self._deadline)

    def complete(self, outcome: Outcome) -> None:
        """Set the outcome and wake the waiting thread (any thread, once, under the bus lock)."""
        self.outcome = outcome
        self._signal.release()

    def wait(self, deadline: float | None) -> bool:
        """Wait until completed or ``deadline`` (`time.monotonic`); True if completed."""
        if deadline is None:
            return self._signal.acquire()
        remaining = min(deadline - monotonic(), threading.TIMEOUT_MAX)
        return self._signal.acquire(timeout=max(0.0, remaining))


class TaskWaiter(_Waiter):
    """A waiter for a trio task (trio faces, and the bus server's processors); made on its
    loop."""

    __slots__ = ("_event", "_thread", "_token")

    def __init__(self) -> None:
        super().__init__()
        self._event = trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        self._thread = threading.get_ident()

    def run_async(self) -> Awaitable[bool]:
        return self.wait(self._deadline)

    def complete(self, outcome: Outcome) -> None:
        """Set the outcome and wake the waiting task (any thread, once, under the bus lock)."""
        self.outcome = outcome
        if threading.get_ident() == self._thread:
            self._event.set()
            return
        try:
            self._token.run_sync_soon(self._event.set)
        except trio.RunFinishedError:  # the loop ended: nobody waits any more
            pass

    async def wait(self, deadline: float | None) -> bool:
        """Wait until completed or ``deadline`` (`time.monotonic`); True if completed."""
        scope = (nullcontext() if deadline is None
                 else trio.move_on_after(max(0.0, deadline - monotonic())))
        with scope:
            await self._event.wait()
        return self._event.is_set()


class Answer(_Waiter):
    """Nobody waits: a client's send or request that the bus server answers on its
    connection once the outcome comes. Completed once, under the bus lock, as a waiter is;
    whoever completed it then calls `send`, after letting the lock go (the answer is I/O)."""

    __slots__ = ("_write",)

    def __init__(self, write: Callable[[Outcome | None], object]) -> None:
        super().__init__()
        self._write = write

    def complete(self, outcome: Outcome) -> None:
        """Set the outcome (once, under the bus lock)."""
        self.outcome = outcome

    def send(self) -> None:
        """Write the answer (any thread, the bus lock not held)."""
        self._write(self.outcome)

    def run(self) -> bool:
        raise RuntimeError("nobody waits on an Answer: it is sent")

    def run_async(self) -> Awaitable[bool]:
        raise RuntimeError("nobody waits on an Answer: it is sent")


Waiter = ThreadWaiter | TaskWaiter | Answer


def send_answers(waiters: list[Waiter]) -> None:
    """`Answer.send` each of ``waiters`` that is an `Answer` (the bus lock not held)."""
    for waiter in waiters:
        if isinstance(waiter, Answer):
            waiter.send()
