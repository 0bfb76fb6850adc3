"""`Lanes`: each connection's async processors, started in the order their requests were read,
each in a task of its own (trio's public API only).

Theory of operation (loop thread only):
- A request for an async processor joins its connection's lane (a deque) and a task is
  started for it at once, in the nursery ``nursery_of(conn)`` names (a trio connection's
  own, so that its close cancels them). The tasks are interchangeable: each, as it starts,
  takes the lane's head, whichever request that is, and runs it. trio runs one task at a
  time until it suspends, so the heads are taken, and the processors begin, in the order
  read, though trio may run the tasks of one scheduling batch in any order (it reverses
  some on purpose); one that suspends never holds up those behind it. A read's tasks all run
  in the next scheduling batch: no pass of the event loop per request.
- Every task's context is a copy of its starter's (trio copies the context at
  ``start_soon``): each request runs in a fresh context and no binding leaks from one
  request to the next.
- While a lane holds work, the transport's own frames of that connection (the stream frames:
  run synchronously, with no task, when the lane is empty) queue in it behind that work,
  each with a task of its own too, so a stream's opening request is acted on before a
  CANCEL read after it.
- Work whose connection closed before its task took it is dropped (``drop``), as the rest of
  a read that closed its connection is.
- `wait_begun` lets a server's reader wait, before it reads on, until the work of its last
  read has begun: the answers of the processors that did not suspend are queued by then, so
  its pause above the high water mark counts them, as when they ran in the reader.
- `in_async_processor` tells whether the calling task is one of these tasks (a processor
  that waits for the endpoint's processing to end must not wait for itself).

Measured against the shortcut this replaced (running a processor's first step in the reader
by stepping its coroutine through trio's trap protocol), and against a chain of tasks each
starting the next (a pass of the event loop per request: about three times the server's CPU
per pipelined request): see docs/architecture.md, Dispatch.
"""

from __future__ import annotations

from collections import deque
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from codec import RemotingCommand

__all__ = ["Lanes", "in_async_processor"]

# The task that runs a lane's work; each task sets it in its own context, so a task a
# processor starts (a copy of that context) is not taken for the lane's.
_LANE_TASK: Final[ContextVar[object]] = ContextVar("remoting_lane_task", default=None)


def in_async_processor() -> bool:
    """True in the task running an async processor (or the hooks around it) now."""
    return _LANE_TASK.get() is trio.lowlevel.current_task()


class Closable(Protocol):
    """What a lane reads of its connection."""

    @property
    def closed(self) -> bool: ...


# One piece of work: (async, fn, conn, request, arg); ``fn(conn, request, arg)`` is awaited
# when async (a processor, in the lane's task), else called (a frame of the transport's).
Work = tuple[bool, "Callable[..., Any]", Any, "RemotingCommand", Any]


class _Lane(deque[Work]):
    """One connection's work not begun yet, a task started for each piece; ``begun`` is
    parked on by `Lanes.wait_begun`."""

    __slots__ = ("begun",)

    def __init__(self) -> None:
        super().__init__()
        self.begun: trio.lowlevel.ParkingLot | None = None  # made only when waited on


class Lanes:
    """The lanes of an endpoint's connections (see the module docstring)."""

    __slots__ = ("_drop", "_lanes", "_nursery_of")

    def __init__(self, nursery_of: Callable[[Any], trio.Nursery],
                 drop: Callable[[Any, RemotingCommand, bool], None]) -> None:
        self._lanes: dict[Any, _Lane] = {}
        self._nursery_of = nursery_of  # where a connection's processors run
        self._drop = drop  # drop(conn, request, async): work that will not run

    def busy(self, conn: Closable) -> bool:
        """True while ``conn`` has work waiting to start (its frames must queue behind it)."""
        return conn in self._lanes

    def start(self, conn: Closable, fn: Callable[[Any, RemotingCommand, Any], Awaitable[None]],
              request: RemotingCommand, arg: Any) -> None:
        """Await ``fn(conn, request, arg)`` in a task of its own, after the work before it
        in ``conn``'s lane began."""
        self._add(conn, (True, fn, conn, request, arg))

    def queue(self, conn: Closable, fn: Callable[[Any, RemotingCommand, Any], None],
              request: RemotingCommand, arg: Any) -> None:
        """Call ``fn(conn, request, arg)`` once the work waiting in ``conn``'s lane began
        (call only while `busy`)."""
        self._add(conn, (False, fn, conn, request, arg))

    async def wait_begun(self, conn: Closable) -> None:
        """Wait until the work handed over for ``conn`` so far has begun (at once if it has:
        no checkpoint then)."""
        lane = self._lanes.get(conn)
        if lane is not None:
            if lane.begun is None:
                lane.begun = trio.lowlevel.ParkingLot()
            await lane.begun.park()

    def _add(self, conn: Closable, work: Work) -> None:
        """Append ``work`` to ``conn``'s lane and start a task that takes the lane's head."""
        lane = self._lanes.get(conn)
        if lane is None:
            self._lanes[conn] = lane = _Lane()
        lane.append(work)
        try:
            self._nursery_of(conn).start_soon(self._run, conn, lane)
        except RuntimeError:  # the nursery is closed (the endpoint is ending): it will not run
            lane.pop()  # as many pieces as tasks: the tasks already started take the rest
            if not lane:
                self._ended(conn, lane)
            self._drop(conn, work[3], work[0])

    def _ended(self, conn: Closable, lane: _Lane) -> None:
        """Nothing waits in ``lane`` any more: a new request starts a new one."""
        if self._lanes.get(conn) is lane:
            del self._lanes[conn]
        if lane.begun is not None:
            lane.begun.unpark_all()

    async def _run(self, conn: Closable, lane: _Lane) -> None:
        """Take the lane's head (whichever piece it is: the tasks are interchangeable) and
        run it."""
        is_async, fn, _, request, arg = lane.popleft()
        if not lane:
            self._ended(conn, lane)
        if conn.closed:
            self._drop(conn, request, is_async)
        elif is_async:
            _LANE_TASK.set(trio.lowlevel.current_task())
            await fn(conn, request, arg)
        else:
            fn(conn, request, arg)
