"""`ThreadCalls`: calls from threads handed to the loop thread (the blocking server, processors'
channel handles, and a `RemotingClient` with ``io="loop"``).

Theory of operation:
- `submit` hands a call to the loop through the inbox; calls made by many threads at once
  reach the loop together, in one wake-up, and take the same path as a trio call there
  (`Invoker.start`): the call is in the response table before its first byte leaves, and only
  the loop touches the table, permits and counters. `submit_many` hands over a whole
  ``invoke_many`` batch at once.
- The calling thread then blocks on the call's future (a lock released at completion, see
  `_future`); the loop's deadline timer ends the call at its deadline, on the loop's clock.
- ``call_*`` are the blocking face's driver (`_caller.BlockingDriver`): one method per
  kind of call.
"""

from __future__ import annotations

import _thread
import threading
import time
from typing import TYPE_CHECKING, Any, Final, Protocol

from codec import ResponseCode, next_opaque

from ..._errors import RemotingError, translate
from ..._log import log
from .._sansio._backoff import busy_backoff

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from codec import RemotingCommand

    from ..._interceptors import ClientCall
    from .._calling._future import ResponseFuture
    from .._doors._threads import Inbox
    from ._connection import Connection

__all__ = ["CallStarter", "ThreadCalls"]

BATCH_WAIT_SLACK: Final = 30.0  # seconds past a batch's deadlines before asking if the loop lives

Results = list["RemotingCommand | RemotingError"]


class CallStarter(Protocol):
    """What `ThreadCalls` needs from its invoker."""

    @property
    def role(self) -> str: ...

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

    def __init__(self, invoker: CallStarter, inbox: Inbox) -> None:
        self._invoker = invoker
        self._inbox = inbox

    # ------------------------------------------------------------------ the driver

    def call_sync(self, call: ClientCall) -> RemotingCommand:
        """Send and wait, on the calling thread (see `RemotingClient.invoke_sync`)."""
        request, timeout = call.request, call.timeout
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            response = self.submit(call.target, request, timeout, "sync").result()  # type: ignore[arg-type]
            if not call.retry_busy or response.code != ResponseCode.SYSTEM_BUSY:
                return response
            attempt += 1
            pause = busy_backoff(attempt)
            if time.monotonic() + pause >= deadline:
                return response
            time.sleep(pause)
            request = request.with_opaque(next_opaque())  # a new call: never the caller's
            timeout = deadline - time.monotonic()

    def call_async(self, call: ClientCall) -> ResponseFuture:
        """Send; return the future at once (see `RemotingClient.invoke_async`)."""
        return self.submit(call.target, call.request, call.timeout,  # type: ignore[arg-type]
                           "async", call.callback)

    def call_oneway(self, call: ClientCall) -> None:
        """Queue a oneway request and return (see `RemotingClient.invoke_oneway`)."""
        self.submit(call.target, call.request, call.timeout, "oneway").result()  # type: ignore[arg-type]

    def call_many(self, call: ClientCall) -> Results:
        """Send a batch and wait for all of it (see `RemotingClient.invoke_many`)."""
        lock = _thread.allocate_lock()
        lock.acquire()
        box: list[Results] = []

        def on_done(results: Results) -> None:
            box.append(results)
            lock.release()

        requests, timeout, limit = call.requests, call.timeout, call.limit
        self.submit_many(call.target, requests, timeout, limit, on_done,  # type: ignore[arg-type]
                         call.finished_at)
        waves = -(-len(requests) // max(1, limit))
        wait = min(timeout * max(1, waves) + BATCH_WAIT_SLACK, threading.TIMEOUT_MAX)
        while not lock.acquire(timeout=wait):  # a slow pace (few permits) is no failure
            if not self.loop_answers():  # a stalled or ended loop is
                raise RemotingError("invoke_many: the event loop did not finish the batch",
                                    call.addr)
        return box[0]

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
