"""`RequestLoop`: where a thread-driven `RemotingClient` runs the server's requests.

A client that only calls needs no event loop: its threads drive its connections
(`_core._thread_driver`). The server may also call the client (server push, calls back):
those requests run as on every endpoint, through the endpoint's `Dispatcher` (routing, RPC
hooks, interceptors, sync processors on their pools, async processors on the loop), on a loop
thread that this starts the first time a request arrives. The thread that read the requests
hands them over through the endpoint's inbox; their replies go back on the connection they
came from (`ThreadConnection.send`, safe from any thread).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .._core._processing import mark_reader_task
from .._log import log
from ._loop_thread import LoopThread

if TYPE_CHECKING:
    from codec import RemotingCommand

    from .._core._endpoint import Endpoint
    from .._core._thread_connection import ThreadConnection

__all__ = ["RequestLoop"]


class RequestLoop:
    """The loop thread of a thread-driven client's receiving side, started on first use."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._lock = threading.Lock()
        self._loop: LoopThread | None = None
        self._closed = False

    @property
    def loop(self) -> LoopThread | None:
        """The loop thread, once started."""
        return self._loop

    def has_processors(self) -> bool:
        """True once a processor is registered (the server's requests are then read at any
        time, not only while a call waits)."""
        dispatcher = self._endpoint.dispatcher
        return bool(dispatcher.processors) or dispatcher.default is not None

    def serve(self, conn: ThreadConnection, requests: list[RemotingCommand]) -> None:
        """Run ``requests`` (read from ``conn``) on the loop, starting it if needed (any
        thread). Once the client is shut down they are dropped: the connection is closing."""
        if not self._start():
            return
        try:
            self._endpoint.inbox.post(_serve, (self._endpoint, conn, requests))
        except RuntimeError:  # the loop has ended (shutdown)
            log.debug("request.dropped", conn_id=conn.id, requests=len(requests),
                      reason="client shut down")

    def _start(self) -> bool:
        with self._lock:
            if self._closed:
                return False
            if self._loop is None:
                loop = LoopThread("remoting-client")
                loop.start(self._endpoint.run)
                self._loop = loop
            return True

    def close(self) -> LoopThread | None:
        """Start no loop from now on; stop the one running, if any, and return it (to join)."""
        with self._lock:
            self._closed = True
            loop = self._loop
        if loop is not None:
            loop.stop(join=False)
        return loop


def _serve(args: tuple[Endpoint, ThreadConnection, list[RemotingCommand]]) -> None:
    endpoint, conn, requests = args
    try:
        endpoint.nursery.start_soon(_dispatch, endpoint, conn, requests, 0)
    except RuntimeError:  # the endpoint is ending: the connection closes with it
        pass


async def _dispatch(endpoint: Endpoint, conn: ThreadConnection,
                    requests: list[RemotingCommand], first: int) -> None:
    """Dispatch ``requests[first:]`` as a connection's reader does: an async processor that
    suspends is finished by this task, and a new task takes the requests after it."""
    mark_reader_task()
    dispatcher = endpoint.dispatcher
    for i in range(first, len(requests)):
        suspension = dispatcher.request_received(conn, requests[i])
        if suspension is not None:
            if i + 1 < len(requests):
                endpoint.nursery.start_soon(_dispatch, endpoint, conn, requests, i + 1)
            else:
                dispatcher.read_done(conn)
            await suspension.finish()
            return
    dispatcher.read_done(conn)
