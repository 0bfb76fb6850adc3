"""Everything that crosses between an endpoint's loop thread and other threads.

Theory of operation (the concurrency model, docs/architecture.md):
- The loop thread owns all transport state: sockets, connections, outbound queues, the response
  table, permits, processor bookkeeping. No other thread touches it.
- Other threads reach the loop through one door, the `Inbox`: ``post(fn, arg)`` appends to a
  deque (thread-safe by CPython's documented guarantee) and asks trio to run one drain soon,
  unless a drain is already due. Everything posted before a drain runs is handled by it, so a
  burst of calls from threads, or of results from a pool, costs the loop one wake-up.
- The drain flag is a benign race: two threads may both schedule a drain (one runs empty); a
  post never goes unseen, because the drain clears the flag before it empties the deque.
- What leaves the loop for other threads: completed futures (a lock a waiting thread blocks on,
  see `_future`), user callbacks (the `CallbackRunner`'s executor), channel events (`_events`).
- `mark_own_thread` labels the threads an endpoint starts (pool and callback threads): a
  shutdown called from one of them must not wait for itself.
- Calls from threads go through `_thread_calls`, which also holds the one shortcut for
  calls: a blocking ``invoke_sync`` sending on an idle connection itself. The other shortcut,
  a pool thread's lone reply, is the dispatcher's. Both send through the connection's send
  gate (`Sender`), the one lock a thread shares with a connection's state.
"""

from __future__ import annotations

import _thread
import threading
from collections import deque
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._log import log

if TYPE_CHECKING:
    from collections.abc import Callable

    import trio

__all__ = ["CallbackRunner", "Inbox", "in_own_thread", "mark_own_thread"]

T = TypeVar("T")

_OWN: Final = threading.local()  # .owner: whose pools or callbacks this thread runs


def mark_own_thread(owner: object) -> None:
    """Label the calling thread as one that ``owner`` started (and whose shutdown joins it)."""
    _OWN.owner = owner


def in_own_thread(owner: object) -> bool:
    """True in a thread that ``owner`` started (see `mark_own_thread`)."""
    return getattr(_OWN, "owner", None) is owner


class Inbox:
    """Thread-safe hand-off of ``fn(arg)`` calls into the loop thread, batched."""

    __slots__ = ("_items", "_scheduled", "_token")

    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._items: deque[tuple[Callable[[Any], object], Any]] = deque()
        self._scheduled = False

    def open(self, token: trio.lowlevel.TrioToken) -> None:
        """Start accepting posts for the loop of ``token`` (called on the loop thread)."""
        self._token = token

    def post(self, fn: Callable[[Any], object], arg: Any) -> None:
        """Run ``fn(arg)`` on the loop thread soon (from any thread).

        Raises:
            RuntimeError: the loop has not started or has ended (trio.RunFinishedError).
        """
        token = self._token
        if token is None:
            raise RuntimeError("the endpoint's loop is not running")
        self._items.append((fn, arg))
        if not self._scheduled:
            self._scheduled = True
            try:
                token.run_sync_soon(self._drain)
            except BaseException:  # the loop is gone: keep refusing, never swallow silently
                self._scheduled = False
                self._items.clear()
                raise

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        """Run ``fn()`` on the loop thread and return its result, blocking the calling thread
        (not the loop's) for at most ``timeout`` seconds.

        Raises:
            RuntimeError: the loop is not running, or did not run ``fn`` in time.
            Whatever ``fn`` raised.
        """
        done = _thread.allocate_lock()
        done.acquire()
        box: list[tuple[bool, Any]] = []

        def run(_: object) -> None:
            try:
                box.append((True, fn()))
            except BaseException as exc:
                box.append((False, exc))
            finally:
                done.release()

        self.post(run, None)
        if not done.acquire(timeout=timeout):
            raise RuntimeError(f"the endpoint's loop did not answer within {timeout}s")
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def _drain(self) -> None:
        self._scheduled = False  # first: an item appended after this line schedules a new drain
        items = self._items
        while items:
            fn, arg = items.popleft()
            try:
                fn(arg)
            except Exception:  # one bad hand-off must not take the event loop down
                log.error("inbox.failed", fn=getattr(fn, "__qualname__", repr(fn)),
                          exc_info=True)


class _InlineExecutor(Executor):
    """Runs a callback at once in the calling thread (once the endpoint has stopped)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


_INLINE: Final = _InlineExecutor()


class CallbackRunner:
    """The executor that runs user callbacks, never on the event loop (RocketMQ's
    ``callbackExecutor``): made on first use, with ``threads`` threads."""

    def __init__(self, name: str, threads: int, owner: object) -> None:
        self._name = name
        self._threads = threads
        self._owner = owner
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def executor(self) -> Executor:
        """Return the executor (after `close`, one that runs callbacks in the calling thread,
        as the loop is gone)."""
        executor = self._executor
        if executor is not None:
            return executor
        with self._lock:
            if self._closed:
                return _INLINE
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._threads, thread_name_prefix=self._name,
                    initializer=mark_own_thread, initargs=(self._owner,),
                )
            return self._executor

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the executor; here, if it has just been shut down (the endpoint
        stopped between the lookup and the submit: later callbacks run here anyway)."""
        try:
            self.executor().submit(fn, *args)
        except RuntimeError:  # cannot schedule new futures after shutdown
            fn(*args)

    def close(self, final: bool = True, timeout: float = 5.0) -> None:
        """Run the callbacks still queued, then stop the threads; wait ``timeout`` seconds at
        most for that (a callback that never returns must not hang shutdown: its thread is
        left to finish, logged as ``callbacks.still_running``).

        With ``final=False`` a new executor is made on next use; otherwise later callbacks run
        at once in the thread that completes or registers them.
        """
        with self._lock:
            executor, self._executor = self._executor, None
            self._closed = final
        if executor is None:
            return
        closer = threading.Thread(target=executor.shutdown, name=f"{self._name}-close",
                                  daemon=True)
        closer.start()
        closer.join(timeout)
        if closer.is_alive():
            log.warning("callbacks.still_running", seconds=timeout,
                        hint="a callback has not returned; shutdown goes on without it")
