"""`LoopThread`: a daemon thread running ``trio.run`` around one long-lived ``serve``."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

import trio

from .._log import log

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["JOIN_TIMEOUT", "LoopThread"]

JOIN_TIMEOUT: Final = 10.0


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
        """Cancel ``serve``; with ``join``, wait for the thread (not from the thread itself)."""
        if self.token is not None and self._scope is not None:
            try:
                self.token.run_sync_soon(self._scope.cancel)
            except trio.RunFinishedError:
                pass
        if join and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_TIMEOUT)

    @property
    def alive(self) -> bool:
        """True while the loop thread runs."""
        return self._thread is not None and self._thread.is_alive()
