"""`ThreadCalls`: calls made from threads other than the loop's (blocking faces, processors).

Theory of operation:
- `submit` hands a call to the loop through the inbox; calls made by many threads at once
  reach the loop together, in one wake-up, and take the same path as a trio call there
  (`Invoker.start`). `submit_many` hands over a whole ``invoke_many`` batch at once.
- The shortcut (`send_directly`): a blocking ``invoke_sync`` on a live, idle, plain-TCP
  connection sends its own request, through the connection's send gate, because the hand-off
  costs 20-35 µs per call (docs/performance.md). The call is registered in `pending` before
  its bytes leave; the loop adopts pending calls into its response table (`adopt`) before it
  looks a response up, sends a call, expires calls, or fails a connection's calls.
- Such a call's thread enforces its deadline itself: past it, it asks the loop to expire the
  call (``ResponseFuture._overdue``), so no wake-up of the loop is needed per call.
- Only the loop completes futures, touches the table, permits and counters; a thread here
  only appends to `pending` (a deque: thread-safe) and posts to the inbox.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from codec import encode_frame_parts, next_opaque

from .._errors import RemotingError, translate
from .._log import log

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from codec import RemotingCommand

    from .._observability._statistics import Counters
    from ._channels import ChannelTable
    from ._connection import Connection
    from ._deadlines import Deadlines
    from ._future import ResponseFuture
    from ._response_table import ResponseTable
    from ._threads import Inbox

__all__ = ["CallStarter", "ThreadCalls"]


class CallStarter(Protocol):
    """What `ThreadCalls` needs from its invoker."""

    @property
    def role(self) -> str: ...

    @property
    def deadlines(self) -> Deadlines: ...

    @property
    def channels(self) -> ChannelTable: ...

    @property
    def max_frame(self) -> int: ...

    @property
    def max_header(self) -> int: ...

    def now(self) -> float: ...

    def new_future(self, target: str | Connection | None, request: RemotingCommand,
                   timeout: float, kind: Any, callback: Any = None, threaded: bool = False
                   ) -> ResponseFuture: ...

    def start(self, target: str | Connection | None, fut: ResponseFuture, kind: Any
              ) -> None: ...

    def start_batch(self, target: str | Connection | None, requests: Sequence[RemotingCommand],
                    timeout: float, limit: int, on_done: Callable[[list[Any]], None],
                    finished_at: list[float] | None = None) -> None: ...


class ThreadCalls:
    """The door for calls from other threads (see the module docstring)."""

    def __init__(self, invoker: CallStarter, table: ResponseTable, counters: Counters,
                 inbox: Inbox) -> None:
        self._invoker = invoker
        self._table = table
        self._counters = counters
        self._inbox = inbox
        # calls threads registered and sent themselves: appended by a thread before the bytes
        # leave, taken by the loop (`adopt`); a deque's truth test costs no Python call
        self.pending: deque[ResponseFuture] = deque()

    # ------------------------------------------------------------------ any thread

    def submit(self, target: str | Connection | None, request: RemotingCommand, timeout: float,
               kind: Any, callback: Callable[[ResponseFuture], object] | None = None
               ) -> ResponseFuture:
        """Hand a call to the loop; return its future (any thread but the loop's).

        For ``kind="oneway"`` the future completes (with the request) once the frame is queued.

        Raises:
            RemotingError: the endpoint is shut down.
        """
        invoker = self._invoker
        fut = invoker.new_future(target, request, timeout, kind, callback, threaded=True)
        try:
            self._inbox.post(_start, (invoker, target, fut, kind), _refuse_start)
        except RuntimeError as exc:  # trio.RunFinishedError
            raise RemotingError(f"the {invoker.role} is shut down", fut.addr) from exc
        return fut

    def submit_many(self, target: str | Connection | None, requests: Sequence[RemotingCommand],
                    timeout: float, limit: int, on_done: Callable[[list[Any]], None],
                    finished_at: list[float] | None = None) -> None:
        """Hand an ``invoke_many`` batch to the loop; ``on_done(results)`` runs there.

        Raises:
            RemotingError: the endpoint is shut down.
        """
        invoker = self._invoker
        try:
            self._inbox.post(_start_batch, (invoker, target, requests, timeout, limit, on_done,
                                            finished_at), _refuse_batch)
        except RuntimeError as exc:
            raise RemotingError(f"the {invoker.role} is shut down") from exc

    def loop_answers(self, within: float = 5.0) -> bool:
        """True if the loop runs a hand-off within ``within`` seconds (not stalled or ended)."""
        try:
            self._inbox.call(lambda: None, within)
        except RuntimeError:
            return False
        return True

    def send_directly(self, addr: str | Connection | None, request: RemotingCommand,
                      timeout: float) -> ResponseFuture | None:
        """Register and send a blocking ``invoke_sync`` from the calling thread.

        Only on a live, idle, plain-TCP connection to ``addr``; returns None (nothing sent or
        registered) when `submit` must be taken. A private copy of the request with a fresh
        opaque goes on the wire: the caller's command is never changed here, so threads
        sending the same command at once cannot collide. As RocketMQ's ``invokeSync``, such a
        call takes no in-flight permit: it holds its caller's thread.
        """
        opaque = request.opaque  # a bad one of the caller's is refused by the loop's path
        if (type(addr) is not str or timeout <= 0 or type(opaque) is not int
                or not -0x80000000 <= opaque <= 0x7FFFFFFF):
            return None
        invoker = self._invoker
        conn = invoker.channels.by_addr.get(addr)
        if conn is None or conn.closed:
            return None
        opaque = next_opaque()
        try:
            frame = encode_frame_parts(request.with_opaque(opaque), invoker.max_frame,
                                       invoker.max_header)
        except Exception:  # submit reports it
            return None
        fut = invoker.new_future(addr, request, timeout, "sync", threaded=True)
        fut.opaque = opaque
        fut.conn = conn
        fut.addr = conn.remote_addr
        fut.deadline = invoker.now() + timeout
        fut._overdue = self._overdue
        pending = self.pending
        if not conn.send_from_thread(frame, lambda: pending.append(fut)):
            return None
        return fut

    def _overdue(self, fut: ResponseFuture) -> None:
        """A call sent directly passed its deadline (on its thread): expire it on the loop."""
        try:
            self._inbox.post(self._expire, fut)
        except RuntimeError:  # the loop has ended: its shutdown failed the call
            pass

    # ------------------------------------------------------------------ loop thread

    def _expire(self, fut: ResponseFuture) -> None:
        self.adopt()
        if self._table.pop_for(fut.opaque, fut.conn) is fut:
            self._invoker.deadlines.timed_out(fut)

    def adopt(self) -> None:
        """Move the calls threads sent themselves into the response table."""
        pending = self.pending
        if not pending:
            return
        counters = self._counters
        sent = counters.sent
        deadlines = self._invoker.deadlines
        while pending:
            fut = pending.popleft()
            try:
                self._table.add(fut)
            except ValueError:  # only an opaque a user set by hand can collide
                fut._fail_send(f"opaque {fut.opaque} is already pending")
                continue
            code = fut.request.code
            sent[code] = sent.get(code, 0) + 1
            counters.count_thread_send()
            if fut.deadline < deadlines.armed:
                deadlines.arm(fut.deadline)


def _start(args: tuple[CallStarter, str | Connection | None, ResponseFuture, Any]) -> None:
    """Start a call a thread handed over; a failure ends its future (its thread waits on it)."""
    invoker, target, fut, kind = args
    try:
        invoker.start(target, fut, kind)
    except Exception as exc:  # a bug: reported, never a future pending for ever
        log.error("request.failed", addr=fut.addr, exc_info=exc)
        if not fut.done():
            fut._fail(translate(exc, "call", fut.addr))


def _start_batch(args: tuple[CallStarter, str | Connection | None, Sequence[RemotingCommand],
                             float, int, Callable[[list[Any]], None], list[float] | None]
                 ) -> None:
    """Start a batch a thread handed over; a failure ends each of its calls."""
    invoker, target, requests, timeout, limit, on_done, finished_at = args
    try:
        invoker.start_batch(target, requests, timeout, limit, on_done, finished_at)
    except Exception as exc:  # a bug: reported, never a thread waiting for the batch's slack
        log.error("request.failed", exc_info=exc)
        on_done([translate(exc, "call", None)] * len(requests))


def _refuse_start(args: tuple[CallStarter, str | Connection | None, ResponseFuture, Any]
                  ) -> None:
    """The loop ended before it could start the call: fail its future."""
    invoker, _, fut, _ = args
    fut._fail(RemotingError(f"the {invoker.role} is shut down", fut.addr))


def _refuse_batch(args: tuple[CallStarter, str | Connection | None, Sequence[RemotingCommand],
                              float, int, Callable[[list[Any]], None], list[float] | None]
                  ) -> None:
    """The loop ended before it could start the batch: fail each of its calls."""
    invoker, _, requests, _, _, on_done, _ = args
    on_done([RemotingError(f"the {invoker.role} is shut down")] * len(requests))
