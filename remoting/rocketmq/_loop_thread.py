"""A consumer's engine on a thread of its own, for the blocking faces.

`EngineThread` runs one trio loop (``trio.run``) in a daemon thread named for the
consumer; the engine and its `TrioRemotingClient` live there. The face's methods reach it
through ``trio.from_thread`` with the loop's token (a few calls per consumer: start,
``commit``, ``seek``, ``assign``, statistics), and `stop` asks the engine to shut down
gracefully and joins the thread. Messages reach the user's threads without a hop per
message: handlers run on the engine's worker threads, and a lite pull consumer's ``poll``
reads a thread-safe buffer.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ._errors import RocketMQError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["EngineThread"]

T = TypeVar("T")


class EngineThread:
    """One trio loop in a thread, running ``main(started)`` until it returns."""

    def __init__(self, name: str,
                 main: Callable[[Callable[[trio.lowlevel.TrioToken], None]], Awaitable[None]]
                 ) -> None:
        self._name = name
        self._main = main
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread; return once ``main`` reported it started.

        Raises:
            whatever ``main`` raised before it started.
        """
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _started(self, token: trio.lowlevel.TrioToken) -> None:
        self._token = token
        self._ready.set()

    def _run(self) -> None:
        try:
            trio.run(self._main, self._started)
        except BaseException as exc:  # reported to start(), or logged by the face
            self._error = exc
        finally:
            self._ready.set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """What ended the loop, if it failed."""
        return self._error

    def _check(self) -> trio.lowlevel.TrioToken:
        if self._token is None or not self.alive:
            raise RocketMQError("the consumer is not running: call start() or use it in a "
                                "with block")
        if threading.current_thread() is self._thread:
            raise RuntimeError("this blocking call was made from the consumer's own loop "
                               "thread; call it from another thread")
        return self._token

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` on the loop; return its result (from another thread)."""
        return trio.from_thread.run(fn, *args, trio_token=self._check())

    def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the loop; return its result (from another thread)."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self._check())

    def soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on the loop soon, without waiting (any thread; no-op once ended)."""
        token = self._token
        if token is None:
            return
        try:
            token.run_sync_soon(fn)
        except trio.RunFinishedError:
            pass

    def join(self, timeout: float | None = None) -> None:
        """Wait for the loop to end."""
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
