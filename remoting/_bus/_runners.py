"""Where a bus runs its handlers: threads of its own for the blocking faces, trio tasks for
the trio faces. Each consumer runs one drain at a time (its messages in order); a runner only
starts it, and runs discard handlers beside it."""

from __future__ import annotations

import inspect
import queue
import threading
from functools import partial
from time import monotonic
from typing import TYPE_CHECKING, Final, Protocol

from .._log import log
from .._steps import drive, drive_async
from ._wire import count_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._steps import Steps
    from ._host import BusHost

__all__ = ["HANDLER_THREADS", "Drain", "Runner", "TaskRunner", "ThreadRunner", "handler_threads_of"]

HANDLER_THREADS: Final = 4  # a blocking bus's handler threads, unless told otherwise
CLOSE_SECONDS: Final = 5.0  # how long closing waits for handlers still running


class Drain(Protocol):
    """A consumer's drain: its handler run on the messages waiting, in order."""

    def drain(self) -> Steps[None]: ...


class Runner(Protocol):
    """Starts consumers' drains and runs discard handlers."""

    @property
    def blocking(self) -> bool:
        """True for threads (handlers are plain functions), False for trio tasks."""
        ...

    def start(self, consumer: Drain) -> None:
        """Start ``consumer``'s drain (from any thread)."""
        ...

    def call(self, fn: Callable[[], object]) -> None:
        """Run a user callback where handlers run (from any thread); a trio runner awaits
        what it returns, if awaitable."""
        ...


def handler_threads_of(threads: object) -> int:
    """Return ``threads`` if it is a usable ``handler_threads``.

    Raises:
        TypeError: not an int.
        ValueError: below 1.
    """
    return count_of("handler_threads", threads, 1)


class ThreadRunner:
    """Daemon threads (``remoting-bus-<role>-N``), started on first use, that run drains
    and callbacks from one queue."""

    blocking = True

    def __init__(self, name: str, threads: int = HANDLER_THREADS) -> None:
        self._name = name
        self._size = handler_threads_of(threads)
        self._jobs: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def start(self, consumer: Drain) -> None:
        self._submit(partial(drive, consumer.drain()))

    def call(self, fn: Callable[[], object]) -> None:
        self._submit(fn)

    def _submit(self, job: Callable[[], object]) -> None:
        if not self._threads:
            with self._lock:
                if not self._threads and not self._closed:
                    for i in range(self._size):
                        thread = threading.Thread(target=self._work, name=f"{self._name}-{i}",
                                                  daemon=True)
                        thread.start()
                        self._threads.append(thread)
        self._jobs.put(job)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except BaseException:  # a job catches its handler's failures; this is a bug
                log.error("bus.handler_failed", exc_info=True)

    def on_own_thread(self) -> bool:
        """True in one of this runner's threads."""
        return threading.current_thread() in self._threads

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Run what is queued, then end the threads; wait ``timeout`` seconds at most (a
        handler that does not return is left running, logged)."""
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
        for _ in threads:
            self._jobs.put(None)
        deadline = monotonic() + timeout
        me = threading.current_thread()
        for thread in threads:
            if thread is not me:
                thread.join(max(0.0, deadline - monotonic()))
        left = sum(t.is_alive() and t is not me for t in threads)
        if left:
            log.warning("bus.handlers_still_running", threads=left, seconds=timeout)


class TaskRunner:
    """Drains and callbacks as tasks of an endpoint (its `BusHost`), started on its loop."""

    blocking = False

    def __init__(self, host: BusHost) -> None:
        self._host = host

    def start(self, consumer: Drain) -> None:
        self._host.spawn(drive_async, consumer.drain())

    def call(self, fn: Callable[[], object]) -> None:
        async def run() -> None:
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.error("bus.handler_failed", exc_info=True)

        self._host.spawn(run)
