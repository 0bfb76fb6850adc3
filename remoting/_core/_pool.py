"""Per-request-code processor pools, and the inbox that brings results back to trio.

A `ProcessorPool` is a bounded set of threads with a bounded backlog: `try_submit` refuses at
once when ``threads + queue_capacity`` tasks are already in the pool (the dispatcher replies
SYSTEM_BUSY ``[OVERLOAD]``). The count lives on the trio thread only (incremented at submit,
decremented when the result is drained), so no lock is needed.

Results come back through `LoopInbox`: worker threads append to a deque and schedule one drain
on the trio thread only when none is pending, so a burst of results costs one wake-up.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections import deque
from time import monotonic
from typing import TYPE_CHECKING, Any

from .._log import log

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor

    import trio

__all__ = ["ExecutorPool", "LoopInbox", "ProcessorPool"]

RESULT_HOLD_SECONDS = 0.001  # longest a finished result waits for its chunk-mates
# At shutdown, all pools' threads together get this long to finish what they are running.
THREAD_JOIN_SECONDS = 5.0


class LoopInbox:
    """Thread-safe hand-off of ``fn(arg)`` calls into the trio thread, batched."""

    __slots__ = ("_items", "_scheduled", "_token")

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self._token = token
        self._items: deque[tuple[Callable[[Any], object], Any]] = deque()
        self._scheduled = False

    def post(self, fn: Callable[[Any], object], arg: Any) -> None:
        """Run ``fn(arg)`` on the trio thread soon (from any thread).

        Raises:
            trio.RunFinishedError: the loop has ended.
        """
        self._items.append((fn, arg))
        if not self._scheduled:
            self._scheduled = True
            try:
                self._token.run_sync_soon(self._drain)
            except BaseException:  # the loop is gone: keep refusing, never swallow silently
                self._scheduled = False
                self._items.clear()
                raise

    def _drain(self) -> None:
        # Clear the flag first: an item appended after this line schedules a new drain.
        self._scheduled = False
        items = self._items
        while items:
            fn, arg = items.popleft()
            try:
                fn(arg)
            except Exception:  # one bad hand-off must not take the event loop down
                log.error("inbox.failed", fn=getattr(fn, "__qualname__", repr(fn)),
                          exc_info=True)


# fn, args, on_result, send_early (see ProcessorPool.try_submit)
Task = tuple["Callable[..., Any]", tuple[Any, ...], "Callable[[Any], object]",
             "Callable[[Any], bool] | None"]


class ProcessorPool:
    """A named, bounded pool of daemon threads running processor tasks, in batches.

    `try_submit` only records a task; `flush` hands what was recorded to the threads in at most
    one chunk per thread. The reader flushes after each read, so the requests of one read cost
    one wake-up per thread instead of one per request, and their results come back together.
    """

    def __init__(
        self, name: str, threads: int, queue_capacity: int, inbox: LoopInbox,
        on_pending: Callable[[ProcessorPool], None] | None = None,
        on_thread_start: Callable[[], None] | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError("a processor pool needs at least one thread")
        self.name = name
        self.threads = threads
        self.capacity = threads + queue_capacity
        self.in_pool = 0  # trio thread only
        self._inbox = inbox
        self._on_pending = on_pending
        self._on_thread_start = on_thread_start
        self._pending: list[Task] = []
        self._queue: queue.SimpleQueue[list[Task] | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._closed = False

    def try_submit(
        self, fn: Callable[..., Any], args: tuple[Any, ...], on_result: Callable[[Any], object],
        send_early: Callable[[Any], bool] | None = None,
    ) -> bool:
        """Record ``fn(*args)`` to run at the next `flush`; its result goes to ``on_result``
        on the trio thread. Returns False (nothing recorded) when the pool is full or closed.

        ``send_early(result)``, if given, is tried on the worker thread when the task ran
        alone (a request on its own, as in request/response ping-pong): if it returns True the
        result was delivered there (a response written straight to the socket) and
        ``on_result`` gets None, for the bookkeeping only. The latency then no longer includes
        waking the event loop's thread. Not done while the pool is full, so that the peer's
        next request never finds this task's slot still taken.
        """
        if self.in_pool >= self.capacity or self._closed:
            return False
        self.in_pool += 1
        pending = self._pending
        pending.append((fn, args, on_result, send_early))
        if len(pending) == 1:
            if self._on_pending is None:
                self.flush()
            else:
                self._on_pending(self)
        return True

    def flush(self) -> None:
        """Hand the recorded tasks to the threads (trio thread)."""
        items = self._pending
        if not items:
            return
        self._pending = []
        while len(self._workers) < min(self.threads, self.in_pool):
            self._spawn()
        n = len(items)
        size = -(-n // min(len(self._workers), n))
        put = self._queue.put
        if size >= n:
            put(items)
        else:
            for i in range(0, n, size):
                put(items[i : i + size])

    def _spawn(self) -> None:
        t = threading.Thread(
            target=self._work, name=f"{self.name}-{len(self._workers)}", daemon=True
        )
        self._workers.append(t)
        t.start()

    def _finish(self, results: list[tuple[Callable[[Any], object], Any]]) -> None:
        self.in_pool -= len(results)
        for on_result, result in results:
            on_result(result)

    def _work(self) -> None:
        if self._on_thread_start is not None:
            self._on_thread_start()
        get = self._queue.get
        finish = self._finish
        copy_context = contextvars.copy_context
        while True:
            batch = get()
            if batch is None:
                return
            results: list[tuple[Callable[[Any], object], Any]] = []
            posted_at = monotonic()
            alone = len(batch) == 1
            for fn, args, on_result, send_early in batch:
                try:  # a fresh context per call: bindings never leak between requests
                    result = copy_context().run(fn, *args)
                    # Not when the pool is full: the peer's next request could then arrive
                    # before the loop frees this slot, and be refused with [OVERLOAD].
                    if (alone and send_early is not None and result is not None
                            and self.in_pool < self.capacity and send_early(result)):
                        result = None  # delivered from here; the loop does the bookkeeping
                except BaseException:  # the task wrappers contain errors; this guards the thread
                    log.error("processor.failed", pool=self.name, during="pool task",
                              exc_info=True)
                    result = None
                results.append((on_result, result))
                # Results go back together (one loop wake-up), but a slow task never holds
                # finished ones back for more than RESULT_HOLD_SECONDS.
                if monotonic() - posted_at >= RESULT_HOLD_SECONDS:
                    if not self._post(finish, results):
                        return
                    results = []
                    posted_at = monotonic()
            if results and not self._post(finish, results):
                return

    def _post(self, finish: Callable[[Any], object], results: Any) -> bool:
        try:
            self._inbox.post(finish, results)
        except RuntimeError:  # the loop is gone (trio.RunFinishedError)
            return False
        return True

    def stop(self) -> None:
        """Take no more tasks; the threads end once the queued ones are done (trio thread)."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        for _ in self._workers:
            self._queue.put(None)

    def join(self, deadline: float) -> list[str]:
        """Join the threads until ``deadline`` (`time.monotonic`); return the names of those
        still running then (stuck in a processor: daemon threads, left behind)."""
        for t in self._workers:
            t.join(max(0.0, deadline - monotonic()))
        return [t.name for t in self._workers if t.is_alive()]


class ExecutorPool:
    """Adapter for a user-supplied `concurrent.futures.Executor` (unbounded by us)."""

    def flush(self) -> None:
        """Tasks go to the executor at once: nothing to flush."""

    def __init__(self, name: str, executor: Executor, inbox: LoopInbox) -> None:
        self.name = name
        self.in_pool = 0
        self._executor = executor
        self._inbox = inbox

    def try_submit(
        self, fn: Callable[..., Any], args: tuple[Any, ...], on_result: Callable[[Any], object],
        send_early: Callable[[Any], bool] | None = None,
    ) -> bool:
        """Submit ``fn(*args)``; False when the executor refuses (shut down or saturated).

        ``send_early`` is not used: results of a user's executor always go through the loop.
        """
        ctx = contextvars.copy_context()
        try:
            future = self._executor.submit(ctx.run, fn, *args)
        except Exception:  # shut down, or a bounded executor that refuses
            return False
        self.in_pool += 1

        def done(f: Any) -> None:
            try:
                result = f.result()
            except BaseException:  # cancelled by the executor's owner: free the slot anyway
                result = None
            try:
                self._inbox.post(self._finish, (on_result, result))
            except RuntimeError:
                pass

        future.add_done_callback(done)
        return True

    def _finish(self, payload: tuple[Callable[[Any], object], Any]) -> None:
        self.in_pool -= 1
        on_result, result = payload
        on_result(result)

    def stop(self) -> None:
        """The user owns the executor; nothing to stop."""

    def join(self, deadline: float) -> list[str]:
        """The user owns the executor's threads; nothing to join."""
        return []
