"""Per-request-code processor pools: threads that run sync processors, in batches.

A `ProcessorPool` is a bounded set of daemon threads with a bounded backlog. On the loop,
`submit` only records a task and `flush` hands what was recorded to the threads in at most one
chunk per thread: the dispatcher flushes after each read, so the requests of one read cost one
wake-up per thread, not one per request. A thread runs its chunk and posts the results back
through the endpoint's `Inbox` in one hand-off (holding finished results at most
`RESULT_HOLD_SECONDS` for their chunk-mates), so they come back to the loop together.
``in_pool`` lives on the loop only (incremented at submit, decremented when results come
back): no lock. An `ExecutorPool` adapts a user's `concurrent.futures.Executor` instead.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from ..._log import log

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor

    from .._doors._threads import Inbox

__all__ = ["THREAD_JOIN_SECONDS", "ExecutorPool", "ProcessorPool"]

RESULT_HOLD_SECONDS: Final = 0.001  # longest a finished result waits for its chunk-mates
# At shutdown, all pools' threads together get this long to finish what they are running.
THREAD_JOIN_SECONDS: Final = 5.0

T = TypeVar("T")


class ProcessorPool(Generic[T]):
    """A named, bounded pool of daemon threads running ``run(task)``, in batches.

    Results come back as ``done([(task, result), ...])`` on the loop thread; ``run`` never
    raises (the processing functions contain failures), and a task that does anyway gives
    the result None, logged. ``run(task, alone)`` learns whether the task runs on its own
    (request/response ping-pong) while the pool has room: it may then deliver its result
    itself (a pool thread's lone reply, see `_threads`).
    """

    def __init__(
        self, name: str, threads: int, queue_capacity: int, *,
        run: Callable[[T, bool], Any], done: Callable[[list[tuple[T, Any]]], None], inbox: Inbox,
        on_pending: Callable[[ProcessorPool[T]], None], on_thread_start: Callable[[], None],
    ) -> None:
        if threads < 1:
            raise ValueError("a processor pool needs at least one thread")
        self.name = name
        self.threads = threads
        self.capacity = threads + queue_capacity
        self.in_pool = 0  # loop thread only
        self._run = run
        self._done = done
        self._inbox = inbox
        self._on_pending = on_pending
        self._on_thread_start = on_thread_start
        self._pending: list[T] = []
        self._queue: queue.SimpleQueue[list[T] | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._closed = False

    def has_room(self) -> bool:
        """True if `submit` would take a task now."""
        return self.in_pool < self.capacity and not self._closed

    def submit(self, task: T) -> bool:
        """Record ``task`` to run at the next `flush`; False (nothing recorded) if full."""
        if self.in_pool >= self.capacity or self._closed:
            return False
        self.in_pool += 1
        pending = self._pending
        pending.append(task)
        if len(pending) == 1:
            self._on_pending(self)
        return True

    def flush(self) -> None:
        """Hand the recorded tasks to the threads, one chunk per thread at most."""
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
        t = threading.Thread(target=self._work, name=f"{self.name}-{len(self._workers)}",
                             daemon=True)
        self._workers.append(t)
        t.start()

    def _finish(self, results: list[tuple[T, Any]]) -> None:
        self.in_pool -= len(results)
        self._done(results)

    def _work(self) -> None:
        self._on_thread_start()
        get = self._queue.get
        run = self._run
        copy_context = contextvars.copy_context
        while True:
            batch = get()
            if batch is None:
                return
            results: list[tuple[T, Any]] = []
            posted_at = monotonic()
            # Not when the pool is full (a racy read, on purpose: a hint): the peer's next
            # request could then arrive before the loop frees this slot, and be refused.
            alone = len(batch) == 1 and self.in_pool < self.capacity
            for task in batch:
                try:  # a fresh context per call: bindings never leak between requests
                    result = copy_context().run(run, task, alone)
                except BaseException:  # the task functions contain errors: this guards the thread
                    log.error("processor.failed", pool=self.name, during="pool task",
                              exc_info=True)
                    result = None
                results.append((task, result))
                # Results go back together (one loop wake-up), but a slow task never holds
                # finished ones back for more than RESULT_HOLD_SECONDS.
                if monotonic() - posted_at >= RESULT_HOLD_SECONDS:
                    if not self._post(results):
                        return
                    results = []
                    posted_at = monotonic()
            if results and not self._post(results):
                return

    def _post(self, results: list[tuple[T, Any]]) -> bool:
        try:
            self._inbox.post(self._finish, results)
        except RuntimeError:  # the loop is gone (trio.RunFinishedError)
            return False
        return True

    def stop(self) -> None:
        """Take no more tasks; the threads end once the queued ones are done (loop thread)."""
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


class ExecutorPool(Generic[T]):
    """Adapter for a user-supplied `concurrent.futures.Executor` (unbounded by us)."""

    def __init__(self, name: str, executor: Executor, *, run: Callable[[T, bool], Any],
                 done: Callable[[list[tuple[T, Any]]], None], inbox: Inbox) -> None:
        self.name = name
        self.in_pool = 0
        self._executor = executor
        self._run = run
        self._done = done
        self._inbox = inbox

    def has_room(self) -> bool:
        """Always True: the executor is the user's to bound."""
        return True

    def submit(self, task: T) -> bool:
        """Submit ``task`` at once; False if the executor refuses (shut down, or bounded)."""
        ctx = contextvars.copy_context()
        try:
            future = self._executor.submit(ctx.run, self._run, task, False)
        except Exception:  # shut down, or a bounded executor that refuses
            return False
        self.in_pool += 1

        def done(f: Any) -> None:
            try:
                result = f.result()
            except BaseException:  # cancelled by the executor's owner: free the slot anyway
                result = None
            try:
                self._inbox.post(self._finish, (task, result))
            except RuntimeError:
                pass

        future.add_done_callback(done)
        return True

    def _finish(self, pair: tuple[T, Any]) -> None:
        self.in_pool -= 1
        self._done([pair])

    def flush(self) -> None:
        """Tasks go to the executor at once: nothing to flush."""

    def stop(self) -> None:
        """The user owns the executor; nothing to stop."""

    def join(self, deadline: float) -> list[str]:
        """The user owns the executor's threads; nothing to join."""
        return []
