"""`Lanes`: each connection's async processors, started in the order their requests were read,
each in a task of its own (trio's public API only).

Theory of operation (loop thread only):
- A request for an async processor joins its connection's lane. A lane exists while it holds
  work not started yet, and then exactly one task is on its way to start it (started in the
  nursery ``nursery_of(conn)`` names: a trio connection's own, so that its close cancels
  them). That task takes the head of the lane and, when more waits behind it, starts the
  task for the next before it runs its processor. trio runs the next task only once this one
  suspended or finished, so processors begin in the order read, and one that suspends never
  holds up those behind it. (Starting one task per request at once would not keep the
  order: trio may run the tasks of one scheduling batch in reverse.)
- Every task's context is a copy of its starter's, taken before the processor before it ran
  (trio copies the context at ``start_soon``): each request runs in a fresh context and no
  binding leaks from one request to the next.
- While a lane holds work, the transport's own frames of that connection (the stream frames:
  run synchronously, with no task, when the lane is empty) queue in it behind that work, so
  a stream's opening request is acted on before a CANCEL read after it.
- Work whose connection closed before its task took it is dropped (``drop``), as the rest of
  a read that closed its connection is.
- `wait_begun` lets a server's reader wait, before it reads on, until the work of its last
  read has begun: the answers of the processors that did not suspend are queued by then, so
  its pause above the high water mark counts them, as when they ran in the reader.
- `in_async_processor` tells whether the calling task is one of these tasks (a processor
  that waits for the endpoint's processing to end must not wait for itself).

Measured against the shortcut this replaced (running a processor's first step in the reader
by stepping its coroutine through trio's trap protocol): see docs/architecture.md, Dispatch.
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
    """One connection's work not begun yet; ``begun`` is parked on by `Lanes.wait_begun`."""

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
        lane = self._lanes.get(conn)
        if lane is not None:
            lane.append((True, fn, conn, request, arg))
            return
        self._lanes[conn] = lane = _Lane()
        lane.append((True, fn, conn, request, arg))
        self._spawn(conn, lane)

    def queue(self, conn: Closable, fn: Callable[[Any, RemotingCommand, Any], None],
              request: RemotingCommand, arg: Any) -> None:
        """Call ``fn(conn, request, arg)`` once the work waiting in ``conn``'s lane began
        (call only while `busy`)."""
        self._lanes[conn].append((False, fn, conn, request, arg))

    async def wait_begun(self, conn: Closable) -> None:
        """Wait until the work handed over for ``conn`` so far has begun (at once if it has:
        no checkpoint then)."""
        lane = self._lanes.get(conn)
        if lane is not None:
            if lane.begun is None:
                lane.begun = trio.lowlevel.ParkingLot()
            await lane.begun.park()

    def _spawn(self, conn: Closable, lane: _Lane) -> None:
        try:
            self._nursery_of(conn).start_soon(self._run, conn, lane)
        except RuntimeError:  # the nursery is closed (the endpoint is ending): none will run
            self._ended(conn, lane)
            for is_async, _, _, request, _ in lane:
                self._drop(conn, request, is_async)
            lane.clear()

    def _ended(self, conn: Closable, lane: _Lane) -> None:
        """Nothing waits in ``lane`` any more: a new request starts a new one."""
        if self._lanes.get(conn) is lane:
            del self._lanes[conn]
        if lane.begun is not None:
            lane.begun.unpark_all()

    async def _run(self, conn: Closable, lane: _Lane) -> None:
        """Take the lane's head, hand the rest to the next task, run the head."""
        _LANE_TASK.set(trio.lowlevel.current_task())
        while lane:
            is_async, fn, _, request, arg = lane.popleft()
            if not lane:
                self._ended(conn, lane)
            if conn.closed:
                self._drop(conn, request, is_async)
                continue
            if not is_async:
                fn(conn, request, arg)
                continue
            if lane:
                self._spawn(conn, lane)  # runs once this one suspends or finishes
            await fn(conn, request, arg)
            return
