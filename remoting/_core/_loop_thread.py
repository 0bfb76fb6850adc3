"""`LoopThread`: a daemon thread running ``trio.run`` around one long-lived ``serve`` (an
endpoint's, for a blocking face or a thread-driven client's receiving side); `on_loop`: a
result computed on it."""

from __future__ import annotations

import threading
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from .._log import log
from ._doors._threads import CALLBACKS_CLOSE_SECONDS
from ._events import EVENTS_CLOSE_SECONDS
from ._receiving._pools import THREAD_JOIN_SECONDS

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._endpoint import Endpoint

__all__ = ["JOIN_TIMEOUT", "LOOP_ANSWER_SECONDS", "LoopThread", "on_loop"]

T = TypeVar("T")
LOOP_ANSWER_SECONDS: Final = 10.0  # a loop that takes longer to answer is stuck

# What a loop's exit may wait for, one after the other (`Endpoint._join_threads`): the
# processor pools (THREAD_JOIN_SECONDS), then the event thread and the callback threads
# (the default timeouts of `EventDispatcher.close` and `CallbackRunner.close`).
EXIT_MARGIN_SECONDS: Final = 2.0  # closing sockets and listeners, thread hops, a busy machine
# A join that gives up sooner returns while the loop still runs though every bound held.
JOIN_TIMEOUT: Final = (THREAD_JOIN_SECONDS + EVENTS_CLOSE_SECONDS + CALLBACKS_CLOSE_SECONDS
                       + EXIT_MARGIN_SECONDS)


def _single(exc: BaseException) -> BaseException:
    """Return the one exception inside nested groups, else ``exc`` (no group escapes)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class LoopThread:
    """Runs an endpoint's loop for a blocking face; `start` returns what ``serve`` started with."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._warned = False
        self.result: Any = None

    def start(self, serve: Callable[..., Any]) -> Any:
        """Start the thread and wait until ``serve`` reported it started.

        Raises:
            Whatever ``serve`` raised before it started (one exception, never a group).
        """
        self._thread = threading.Thread(target=self._run, args=(serve,), name=self.name,
                                        daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise _single(self._error)
        return self.result

    def _run(self, serve: Callable[..., Any]) -> None:
        try:
            trio.run(self._main, serve)
        except BaseException as exc:
            if self._ready.is_set():  # it had started: a bug ended it; calls now fail
                log.critical("loop.crashed", thread=self.name, exc_info=_single(exc))
            self._error = exc  # before start: start() raises it
        finally:
            self._ready.set()

    async def _main(self, serve: Callable[..., Any]) -> None:
        self.token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as nursery:
                self.result = await nursery.start(serve)
                self._ready.set()

    def stop(self, join: bool = True) -> None:
        """Cancel ``serve``; with ``join``, wait for the thread (see `join`) for up to
        `JOIN_TIMEOUT` seconds, the longest its exit takes when every inner bound holds."""
        if self.token is not None and self._scope is not None:
            try:
                self.token.run_sync_soon(self._scope.cancel)
            except trio.RunFinishedError:
                pass
        if join:
            self.join(monotonic() + JOIN_TIMEOUT)

    def join(self, deadline: float) -> None:
        """Wait for the thread until ``deadline`` (``time.monotonic``), not from the thread
        itself; one still running then is left behind, logged once (``loop.still_running``)."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join(max(0.0, deadline - monotonic()))
        if thread.is_alive() and not self._warned:
            self._warned = True
            log.warning("loop.still_running", thread=self.name,
                        reason="its exit outlasted the shutdown's bounds; it is a daemon thread")

    @property
    def alive(self) -> bool:
        """True while the loop thread runs."""
        return self._thread is not None and self._thread.is_alive()


def on_loop(endpoint: Endpoint, loop: LoopThread | None, fn: Callable[[], T]) -> T:
    """Return ``fn()`` computed on ``loop``'s thread (through ``endpoint``'s inbox) while it
    runs, else here (no loop, or called on it: nothing else changes what ``fn`` reads)."""
    if (loop is not None and loop.alive
            and threading.get_ident() != endpoint.loop_thread_id):
        try:
            return endpoint.inbox.call(fn, LOOP_ANSWER_SECONDS)
        except RuntimeError:  # the loop ended meanwhile: nothing changes any more
            pass
    return fn()
