"""`ResponseFuture`: one in-flight request, completed exactly once.

Theory of operation:
- Created for every call; registered in a `ResponseTable` before its request's first byte
  leaves, and completed by whoever removes it from the table first: the response, the
  deadline, the scanner, a connection loss, a send failure or shutdown. ``_complete`` is
  idempotent. With the trio driver all of that happens on the loop thread; with the thread
  driver (`_thread_driver`) on whichever thread removed it.
- Completion gives the in-flight permit back exactly once: at once when there are no user
  callbacks, else after they ran (as RocketMQ since ROCKETMQ-323, so slow callbacks push
  back), through `CallSupport.give_back` (the trio driver's permits are the loop's).
- Waiters: a trio task of the completing loop registers itself without a lock and is
  rescheduled at completion; a task of another trio loop is woken through that loop's token; a
  thread waiting for a call handed to the loop blocks on a lock the future holds from its
  creation, or on a lazily made `threading.Event`; a thread of the thread driver sleeps on its
  `ThreadWaiter`, which completion wakes, and reads for everyone meanwhile (``_driver``);
  completions made by such a reader during a read leave the waking to it
  (`defer_thread_wakes`: it wakes them one after another, see `_read_role`).
  `_LOCK` orders completion against waiters and callbacks registered from other threads.
- User callbacks run on the callback threads (`CallbackRunner`), never on the event loop nor
  on the thread that read the answer (once the endpoint has shut down: where they complete).
- Its underscore methods (`ResponseFuture._complete`, `ResponseFuture._fail`,
  `ResponseFuture._fail_send`, `ResponseFuture._fail_timeout`) are the core's, not the user's:
  whoever removes a call from its table (`Invoker`, `Deadlines`, `GoAway`, `ThreadCalls`, the
  thread driver) completes it through them. They stay private to keep them off the public
  class, and stay methods (not functions of this module) so that completion is one call on
  the hot path.
"""

from __future__ import annotations

import _thread
import threading
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from ... import _checks
from ..._errors import RemotingSendRequestError, RemotingTimeoutError
from ..._log import log

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import RemotingCommand

    from .._doors._threads import CallbackRunner

__all__ = ["CallDriver", "CallSupport", "GivesBack", "NotifyingFuture", "ResponseFuture",
           "ThreadWaiter", "defer_thread_wakes", "thread_waiter"]

# Extra seconds a thread waits past the deadline before it stops trusting the loop's timer.
THREAD_WAIT_SLACK: Final = 5.0
_LOCK: Final = threading.Lock()
_get_ident: Final = _thread.get_ident
_WAIT_MAX: Final = threading.TIMEOUT_MAX
_TASK: Final = trio.lowlevel.Task
_reschedule: Final = trio.lowlevel.reschedule


class GivesBack(Protocol):
    """Permits: `give` returns one."""

    def give(self) -> None: ...


class CallSupport(Protocol):
    """What a future needs from its driver: where callbacks run, how a permit goes back
    from the callback thread."""

    @property
    def callbacks(self) -> CallbackRunner: ...

    def give_back(self, permits: GivesBack) -> None: ...


class CallDriver(Protocol):
    """How a thread waits for a thread-driven call: by driving its connection."""

    def await_call(self, fut: ResponseFuture, timeout: float | None) -> None: ...


class ThreadWaiter:
    """What one thread sleeps on: a lock held while nothing woke it; `wake` releases it
    (any thread), and wakes that come while it is awake add up to one."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def sleep(self, seconds: float) -> None:
        """Sleep until woken or ``seconds`` passed (a wake given before returns at once)."""
        self._lock.acquire(timeout=min(seconds, _WAIT_MAX))

    def wake(self) -> None:
        """Wake the thread (or its next sleep)."""
        try:
            self._lock.release()
        except RuntimeError:  # already woken
            pass

    def reset(self) -> None:
        """Forget a wake not slept on (the thread is done waiting)."""
        self._lock.acquire(blocking=False)


_THREAD: Final = threading.local()
# per thread: where its completions put the ThreadWaiters they would wake (`defer_thread_wakes`)
_DEFERRED: Final = threading.local()


def thread_waiter() -> ThreadWaiter:
    """Return the calling thread's `ThreadWaiter` (one per thread, made on first use)."""
    try:
        return _THREAD.waiter  # type: ignore[no-any-return]
    except AttributeError:
        waiter = _THREAD.waiter = ThreadWaiter()
        return waiter


def defer_thread_wakes(into: list[ThreadWaiter] | None) -> list[ThreadWaiter] | None:
    """From now on, the calling thread's completions append the `ThreadWaiter` s they would
    wake to ``into`` instead of waking them (None: wake them again); return what was set
    before, for the caller to set back (a read nested in a callback run inline must not
    end its outer read's deferral). The thread driver's reader wakes them itself after the
    read's answers, one at a time (`_read_role`'s wake chain)."""
    before: list[ThreadWaiter] | None = getattr(_DEFERRED, "into", None)
    _DEFERRED.into = into
    return before


class ResponseFuture:
    """The pending result of a request (RocketMQ's ResponseFuture plus a Python future).

    Attributes:
        opaque: the request id.
        addr: the peer address.
        timeout: the call's timeout in seconds.
        response_command: the response, once it arrived.
        cause: the exception that ended the call, if it failed.
    """

    __slots__ = (
        "_callbacks", "_done", "_driver", "_event", "_home", "_permits", "_signal", "_support",
        "_waiters",
        "addr", "cause", "close_on_timeout", "conn", "deadline", "opaque", "request", "resent",
        "response_command", "retry_target", "timeout",
    )

    def __init__(self, request: RemotingCommand, addr: str | None, timeout: float,
                 support: CallSupport | None = None, threaded: bool = False,
                 driver: CallDriver | None = None) -> None:
        self.request = request
        self.opaque = request.opaque
        self.addr = addr
        self.timeout = timeout
        self.deadline = float("inf")
        self.conn: Any = None
        self.response_command: RemotingCommand | None = None
        self.cause: BaseException | None = None
        self.close_on_timeout = False
        # where to resend once after a GO_AWAY reply; False: not resendable (a channel's call)
        self.retry_target: str | None | bool = False
        self.resent = False
        self._done = False
        self._waiters: list[trio.lowlevel.Task | _Waiter | ThreadWaiter] | None = None
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[ResponseFuture], object]] | None = None
        self._support = support
        self._permits: GivesBack | None = None
        self._driver = driver  # a thread-driven call: waiting drives its connection
        self._home: int | None = None  # the completing loop's thread, if known
        self._signal: Any = None
        if threaded and driver is None:  # a thread blocks on it: a held lock beats an Event
            self._signal = _thread.allocate_lock()
            self._signal.acquire()
        elif driver is None:  # the completing loop's thread, where waiting needs no lock
            self._home = _get_ident()

    @property
    def is_timeout(self) -> bool:
        """True when the call expired."""
        return isinstance(self.cause, RemotingTimeoutError)

    @property
    def is_send_request_ok(self) -> bool:
        """False when the request could not be written or its connection broke."""
        return not isinstance(self.cause, RemotingSendRequestError)

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
            TypeError, ValueError: ``timeout`` is not None or a number of seconds (NaN).
            RuntimeError: the call is pending and this thread runs trio (await `wait`).
        """
        if timeout is not None:
            timeout = _checks.wait_seconds(timeout)
        if not self._done:
            _checks.outside_trio("ResponseFuture.result", "`await future.wait()`")
        if not self._done and self._driver is not None:
            self._driver.await_call(self, timeout)
            if not self._done:
                raise TimeoutError(f"request {self.opaque} still pending after {timeout}s")
        if not self._done:
            self._block(max(self.timeout + THREAD_WAIT_SLACK if timeout is None else timeout,
                            0.0))
            if not self._done:
                if timeout is not None:
                    raise TimeoutError(f"request {self.opaque} still pending after {timeout}s")
                raise RemotingTimeoutError(self.addr, self.timeout, "response (loop stalled)")
        return self._outcome()

    def _add_thread_waiter(self, waiter: ThreadWaiter) -> bool:
        """Wake ``waiter`` at completion; False (not added) if already done."""
        with _LOCK:
            if self._done:
                return False
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(waiter)
            return True

    def _remove_thread_waiter(self, waiter: ThreadWaiter) -> None:
        with _LOCK:
            waiters = self._waiters
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)

    def _block(self, seconds: float) -> bool:
        """Block the calling thread until done or ``seconds`` passed; True if done."""
        seconds = min(seconds, _WAIT_MAX)  # an infinite timeout: as long as a lock can wait
        signal = self._signal
        if signal is not None:
            if signal.acquire(timeout=seconds):
                signal.release()  # let other waiting threads through
        else:
            with _LOCK:
                if self._event is None:
                    self._event = threading.Event()
                event = self._event
            if not self._done:
                event.wait(seconds)
        return self._done

    async def wait(self) -> RemotingCommand:
        """Wait in trio until done; return the response or raise the failure.

        Cancelling the wait does not cancel the request; it still completes by its deadline.
        """
        if self._done:
            return self._outcome()
        if self._home == _get_ident():  # the completing loop's thread: nothing races
            await trio.lowlevel.wait_task_rescheduled(self._park(trio.lowlevel.current_task()))
        else:
            await self._wait_foreign()
        return self._outcome()

    def _park(self, task: trio.lowlevel.Task) -> Callable[[object], trio.lowlevel.Abort]:
        """Wake ``task`` at completion; return the abort function for its
        ``wait_task_rescheduled`` (which takes it off again). Only on the completing loop's
        thread, while pending: the trio driver's `Invoker.invoke` parks its call's task
        itself with it, one coroutine frame less than awaiting `wait` (the core's, as
        `_complete`)."""
        waiters = self._waiters
        if waiters is None:
            waiters = self._waiters = []
        waiters.append(task)

        def abort_home(_: object) -> trio.lowlevel.Abort:
            waiters.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        return abort_home

    async def _wait_foreign(self) -> None:
        """Wait from a trio loop other than the completing one (a blocking client's future
        awaited in the user's own loop): woken through this loop's token."""
        waiter = _Waiter(trio.lowlevel.current_task(), trio.lowlevel.current_trio_token())
        with _LOCK:
            if self._done:
                return
            if self._waiters is None:
                self._waiters = []
            waiters = self._waiters
            waiters.append(waiter)

        def abort(_: object) -> trio.lowlevel.Abort:
            with _LOCK:
                waiter.aborted = True  # for a wake-up already on its way (_wake)
                if self._waiters is waiters:
                    waiters.remove(waiter)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def add_done_callback(self, fn: Callable[[ResponseFuture], object]) -> None:
        """Call ``fn(self)`` once when done, on the callback executor (or now, if done).

        Raises:
            TypeError: ``fn`` is not callable.
        """
        _checks.callback_of(fn, "fn", optional=False)
        with _LOCK:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        if self._support is not None:
            self._support.callbacks.submit(_run_callback, fn, self)
        else:
            _run_callback(fn, self)

    # ------------------------------------------------------------------ completing (loop thread)

    def _complete(self, response: RemotingCommand | None = None,
                  cause: BaseException | None = None) -> bool:
        """Complete the future once; return False if it was already done."""
        if self._done:
            return False
        self.response_command = response
        self.cause = cause
        with _LOCK:  # fields first: whoever sees _done may read them
            self._done = True
            callbacks = self._callbacks
            waiters, self._waiters = self._waiters, None
        if self._signal is not None:
            self._signal.release()
        if waiters:
            if len(waiters) == 1 and type(waiters[0]) is _TASK:  # a lone task of this loop
                _reschedule(waiters[0])
            else:
                _wake_all(waiters)
        if self._event is not None:
            self._event.set()
        if callbacks:
            support = self._support
            if support is not None:
                support.callbacks.submit(self._run_callbacks, callbacks)
            else:  # a bare future: run them here as a last resort
                self._run_callbacks(callbacks)
        else:
            permits, self._permits = self._permits, None
            if permits is not None:
                permits.give()
        return True

    def _fail_timeout(self) -> bool:
        return self._complete(cause=RemotingTimeoutError(self.addr, self.timeout))

    def _fail_send(self, reason: str) -> bool:
        return self._complete(cause=RemotingSendRequestError(self.addr, reason))

    def _fail(self, cause: BaseException) -> bool:
        return self._complete(cause=cause)

    def _run_callbacks(self, callbacks: list[Callable[[ResponseFuture], object]]) -> None:
        try:
            for fn in callbacks:
                _run_callback(fn, self)
        finally:
            permits, self._permits = self._permits, None
            support = self._support
            if permits is not None and support is not None:
                support.give_back(permits)

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("ok" if self.cause is None else "failed")
        return f"<ResponseFuture opaque={self.opaque} addr={self.addr} {state}>"


class NotifyingFuture(ResponseFuture):
    """The table entry of a call whose outcome goes to one function, on the loop thread.

    For a part of the library that bounds its calls itself and needs no waiter, callback
    thread or in-flight permit per call (the event bus's pushes: its per-consumer window bounds
    them). It is never handed to users; the invoker completes it like any other future, and
    ``on_done(response, cause)`` runs once, where it completes (the loop thread).
    """

    __slots__ = ("_on_done",)

    def __init__(self, request: RemotingCommand, addr: str, timeout: float,
                 on_done: Callable[[RemotingCommand | None, BaseException | None], object]
                 ) -> None:
        super().__init__(request, addr, timeout)
        self._on_done = on_done

    def _complete(self, response: RemotingCommand | None = None,
                  cause: BaseException | None = None) -> bool:
        if self._done:
            return False
        self._done = True
        self.response_command = response
        self.cause = cause
        try:
            self._on_done(response, cause)
        except Exception:  # a bug of the caller's: logged, and the loop goes on
            log.error("callback.failed", opaque=self.opaque, addr=self.addr, exc_info=True)
        return True


class _Waiter:
    """A trio task waiting in `ResponseFuture.wait`, and the token of its loop."""

    __slots__ = ("aborted", "task", "token")

    def __init__(self, task: trio.lowlevel.Task, token: trio.lowlevel.TrioToken) -> None:
        self.task = task
        self.token = token
        self.aborted = False


def _wake_all(waiters: list[trio.lowlevel.Task | _Waiter | ThreadWaiter]) -> None:
    here: object = _UNSET  # the completing thread's loop, looked up at the first foreign waiter
    for waiter in waiters:
        if isinstance(waiter, ThreadWaiter):
            into = getattr(_DEFERRED, "into", None)
            if into is None:
                waiter.wake()
            else:  # a thread driver's reader: it wakes them after the read
                into.append(waiter)
            continue
        if not isinstance(waiter, _Waiter):
            trio.lowlevel.reschedule(waiter)  # a task of this loop
            continue
        if here is _UNSET:
            here = _current_token()
        if waiter.token is here:
            trio.lowlevel.reschedule(waiter.task)
        else:  # a task of another loop: only that loop's thread may wake it
            try:
                waiter.token.run_sync_soon(_wake, waiter)
            except trio.RunFinishedError:
                pass


_UNSET: Final = object()


def _current_token() -> trio.lowlevel.TrioToken | None:
    """The calling thread's trio loop; None outside any (a call refused as the loop ended)."""
    try:
        return trio.lowlevel.current_trio_token()
    except RuntimeError:
        return None


def _wake(waiter: _Waiter) -> None:
    """Wake a waiter of another loop (on that loop's thread) unless it was cancelled since."""
    if not waiter.aborted:
        trio.lowlevel.reschedule(waiter.task)


def _run_callback(fn: Callable[[ResponseFuture], object], fut: ResponseFuture) -> None:
    try:
        fn(fut)
    except (Exception, SystemExit):  # SystemExit too: the next callbacks must still run
        log.error("callback.failed", opaque=fut.opaque, addr=fut.addr, exc_info=True)
