"""`ResponseFuture`: one in-flight request, completed exactly once.

Theory of operation:
- Created by the caller (any thread); registered in a `ResponseTable` and completed only on the
  trio thread, by whoever pops it from the table first: the response, the deadline timer, the
  scanner, a connection loss, a send failure or shutdown. ``_complete`` is idempotent.
- Completion releases the in-flight permit exactly once: at once when there are no user
  callbacks, else after they ran (as RocketMQ since ROCKETMQ-323, so slow callbacks push back).
- Waiters: trio tasks park themselves (`wait_task_rescheduled`) and are rescheduled at
  completion (without a lock on the completing loop's own thread; a task of another loop
  through that loop's token); a future made for a
  thread's call holds a lock from creation until completion, which the thread blocks on;
  other threads fall back to a lazily made `threading.Event`.
  Internal completion hooks run synchronously on the trio thread; user callbacks run on the
  callback executor, never on the event loop.
"""

from __future__ import annotations

import _thread
import threading
from typing import TYPE_CHECKING, Any

import trio

from .._errors import RemotingError, RemotingSendRequestError, RemotingTimeoutError
from .._log import log

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor

    from codec import RemotingCommand

__all__ = ["ResponseFuture"]

# Extra seconds a thread waits past the deadline before it stops trusting the loop's timer.
THREAD_WAIT_SLACK = 5.0
_EVENT_LOCK = threading.Lock()
_CALLBACK_LOCK = threading.Lock()  # callbacks are added from any thread
_get_ident = _thread.get_ident


class ResponseFuture:
    """The pending result of a request (RocketMQ's ResponseFuture plus a Python future).

    Attributes:
        opaque: the request id.
        addr: the peer address.
        timeout: the call's timeout in seconds.
        response_command: the response, once it arrived.
        cause: the exception that ended the call, if it failed.
        is_send_request_ok: False when the request could not be written.
        is_timeout: True when the call expired.
    """

    __module__ = "remoting"
    __slots__ = (
        "_callbacks",
        "_done",
        "_event",
        "_waiters",
        "_executor",
        "_home",
        "_hooks",
        "_lock",
        "_permit_release",
        "addr",
        "cause",
        "close_on_timeout",
        "conn",
        "deadline",
        "is_send_request_ok",
        "is_timeout",
        "opaque",
        "request",
        "resent",
        "response_command",
        "retry_target",
        "timeout",
    )

    def __init__(
        self,
        request: RemotingCommand,
        addr: str | None,
        timeout: float,
        executor: Callable[[], Executor] | None = None,
        threaded: bool = False,
    ) -> None:
        self.request = request
        self.opaque = request.opaque
        self.addr = addr
        self.timeout = timeout
        self.deadline = float("inf")
        self.conn: Any = None
        self.response_command: RemotingCommand | None = None
        self.cause: BaseException | None = None
        self.is_send_request_ok = True
        self.is_timeout = False
        self._done = False
        # trio tasks of the completing loop, or `_Waiter`s of tasks of other loops
        self._waiters: list[trio.lowlevel.Task | _Waiter] | None = None
        self._event: threading.Event | None = None
        self._lock: Any = None
        # the thread of the loop that completes it (made there), where waiting needs no lock
        self._home: int | None = None
        if threaded:  # a thread will block on it: cheaper than an Event
            self._lock = _thread.allocate_lock()
            self._lock.acquire()
        else:
            self._home = _get_ident()
        self._callbacks: list[Callable[[ResponseFuture], object]] | None = None
        self._hooks: list[Callable[[ResponseFuture], None]] | None = None
        self._permit_release: Callable[[], None] | None = None
        self._executor = executor
        self.close_on_timeout = False
        # where to resend once after a GO_AWAY reply; False: not resendable (a channel)
        self.retry_target: str | None | bool = False
        self.resent = False

    # ------------------------------------------------------------------ reading

    def done(self) -> bool:
        """Return True once the future has a response or a failure."""
        return self._done

    def _outcome(self) -> RemotingCommand:
        if self.response_command is not None:
            return self.response_command
        assert self.cause is not None
        raise self.cause

    def result(self, timeout: float | None = None) -> RemotingCommand:
        """Block the calling thread until done; return the response or raise the failure.

        Args:
            timeout: seconds to wait; None waits until the call's own deadline.

        Raises:
            RemotingTimeoutError, RemotingSendRequestError, RemotingConnectError,
            RemotingTooManyRequestsError, RemotingCommandError: how the call ended.
            TimeoutError: ``timeout`` elapsed while the call is still pending.
        """
        if not self._done:
            wait = max(self.timeout + THREAD_WAIT_SLACK if timeout is None else timeout, 0.0)
            lock = self._lock
            if lock is not None:
                if lock.acquire(timeout=wait):
                    lock.release()  # let other waiters through
            else:
                with _EVENT_LOCK:
                    if self._event is None:
                        self._event = threading.Event()
                    event = self._event
                if not self._done:  # re-check: the completer may have missed the new event
                    event.wait(wait)
            if not self._done:
                if timeout is not None:
                    raise TimeoutError(f"request {self.opaque} still pending after {timeout}s")
                raise RemotingTimeoutError(self.addr, self.timeout, "response (loop stalled)")
        return self._outcome()

    async def wait(self) -> RemotingCommand:
        """Wait in trio until done; return the response or raise the failure.

        Cancelling the wait does not cancel the request; it still completes by its deadline.
        """
        if self._done:
            return self._outcome()
        if self._home == _get_ident():  # the completing loop's thread: no other thread races
            task = trio.lowlevel.current_task()
            if self._waiters is None:
                self._waiters = []
            home_waiters = self._waiters
            home_waiters.append(task)

            def abort_home(_: object) -> trio.lowlevel.Abort:
                home_waiters.remove(task)
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort_home)
        else:
            # The waiter may run in a trio loop other than the one that completes the future
            # (a blocking client's future awaited in the user's own loop): under the lock,
            # so a completion on the other thread either sees this waiter or was seen first.
            waiter = _Waiter(trio.lowlevel.current_task(), trio.lowlevel.current_trio_token())
            with _CALLBACK_LOCK:
                if not self._done:
                    if self._waiters is None:
                        self._waiters = []
                    waiters = self._waiters
                    waiters.append(waiter)
                else:
                    waiters = None
            if waiters is not None:

                def abort(_: object) -> trio.lowlevel.Abort:
                    with _CALLBACK_LOCK:
                        waiter.aborted = True  # for a wake-up already on its way (_wake)
                        if self._waiters is waiters:
                            waiters.remove(waiter)
                    return trio.lowlevel.Abort.SUCCEEDED

                await trio.lowlevel.wait_task_rescheduled(abort)
        return self._outcome()

    def add_done_callback(self, fn: Callable[[ResponseFuture], object]) -> None:
        """Call ``fn(self)`` once when done, on the callback executor (or now, if done)."""
        with _CALLBACK_LOCK:  # against _complete on the loop's thread
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        if self._executor is not None:
            _submit(self._executor, _run_callback, fn, self)
        else:
            _run_callback(fn, self)

    # ------------------------------------------------------------------ completing (trio thread)

    def _add_completion_hook(self, fn: Callable[[ResponseFuture], None]) -> None:
        """Register an internal hook run synchronously on the trio thread at completion."""
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(fn)

    def _complete(
        self,
        response: RemotingCommand | None = None,
        cause: BaseException | None = None,
        *,
        timed_out: bool = False,
        send_failed: bool = False,
    ) -> bool:
        """Complete the future once; return False if it was already done."""
        if self._done:
            return False
        self.response_command = response
        self.cause = cause
        self.is_timeout = timed_out
        if send_failed:
            self.is_send_request_ok = False
        with _CALLBACK_LOCK:  # fields first: whoever sees _done may read them
            self._done = True
            callbacks = self._callbacks
            waiters, self._waiters = self._waiters, None
        deferred = bool(callbacks) and self._executor is not None
        if not deferred:
            self._release_permit()  # before the hooks: a batch may send its next request
        if self._lock is not None:
            self._lock.release()
        if waiters:
            for waiter in waiters:
                if not isinstance(waiter, _Waiter):
                    trio.lowlevel.reschedule(waiter)  # a task of this loop
                elif waiter.token is trio.lowlevel.current_trio_token():
                    trio.lowlevel.reschedule(waiter.task)
                else:  # a task of another loop: only that loop's thread may wake it
                    try:
                        waiter.token.run_sync_soon(_wake, waiter)
                    except trio.RunFinishedError:
                        pass
        if self._event is not None:
            self._event.set()
        if self._hooks is not None:
            for hook in self._hooks:
                hook(self)
        if deferred:
            assert callbacks is not None
            assert self._executor is not None
            _submit(self._executor, self._run_callbacks, callbacks)
        elif callbacks:  # no executor (a bare future): run them here as a last resort
            self._run_callbacks(callbacks)
        return True

    def _fail_timeout(self) -> bool:
        return self._complete(
            cause=RemotingTimeoutError(self.addr, self.timeout), timed_out=True
        )

    def _fail_send(self, reason: str) -> bool:
        return self._complete(
            cause=RemotingSendRequestError(self.addr, reason), send_failed=True
        )

    def _fail(self, cause: RemotingError) -> bool:
        return self._complete(cause=cause)

    def _release_permit(self) -> None:
        release, self._permit_release = self._permit_release, None
        if release is not None:
            release()

    def _run_callbacks(self, callbacks: list[Callable[[ResponseFuture], object]]) -> None:
        try:
            for fn in callbacks:
                _run_callback(fn, self)
        finally:
            release, self._permit_release = self._permit_release, None
            if release is not None:  # a trio.Semaphore's: only the loop's thread may touch it
                self.conn.endpoint.call_on_loop(release)

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("ok" if self.cause is None else "failed")
        return f"<ResponseFuture opaque={self.opaque} addr={self.addr} {state}>"


def _submit(executor: Callable[[], Executor], fn: Callable[..., object], *args: Any) -> None:
    """Run ``fn(*args)`` on the callback executor; here if it has just been shut down (the
    endpoint stopped between the lookup and the submit: later callbacks run here anyway)."""
    try:
        executor().submit(fn, *args)
    except RuntimeError:  # cannot schedule new futures after shutdown
        fn(*args)


class _Waiter:
    """A trio task waiting in `ResponseFuture.wait`, and the token of its loop."""

    __slots__ = ("aborted", "task", "token")

    def __init__(self, task: trio.lowlevel.Task, token: trio.lowlevel.TrioToken) -> None:
        self.task = task
        self.token = token
        self.aborted = False


def _wake(waiter: _Waiter) -> None:
    """Wake a waiter of another loop (on that loop's thread) unless it was cancelled since."""
    if not waiter.aborted:
        trio.lowlevel.reschedule(waiter.task)


def _run_callback(fn: Callable[[ResponseFuture], object], fut: ResponseFuture) -> None:
    try:
        fn(fut)
    except Exception:
        log.error("callback.failed", opaque=fut.opaque, addr=fut.addr, exc_info=True)
