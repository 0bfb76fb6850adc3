"""`RequestLoop`: where a thread-driven `RemotingClient` runs the server's requests.

A client that only calls needs no event loop: its threads drive its connections
(`_core._thread_driver`). The server may also call the client (server push, calls back, the
items of a stream the client opened): those requests run as on every endpoint, through the
endpoint's `Dispatcher` (routing, RPC hooks, interceptors, sync processors on their pools,
async processors and stream frames on the loop), on a loop thread that this starts the first
time a request arrives (or a stream is opened). The thread that read the requests hands them
over through the endpoint's inbox; their replies go back on the connection they came from
(`ThreadConnection.send`, safe from any thread).

Order: a connection's requests are dispatched in the order they were read, as a trio
connection's reader does (a stream's items must stay in order): each connection has one
queue on the loop and at most one task taking from it. An async processor that suspends is
finished by the task that ran it while a new task takes the rest. Once the connection is
closed, nothing more of it is dispatched.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

from ..._errors import RemotingError
from ..._log import log
from .._loop_thread import LoopThread
from .._receiving._first_step import mark_reader_task

if TYPE_CHECKING:
    from codec import RemotingCommand

    from .._endpoint import Endpoint
    from ._thread_connection import ThreadConnection

__all__ = ["RequestLoop"]


class RequestLoop:
    """The loop thread of a thread-driven client's receiving side, started on first use."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._lock = threading.Lock()
        self._loop: LoopThread | None = None
        self._closed = False
        # each connection's requests not dispatched yet (loop thread only); a connection is
        # here while a task takes from its queue
        self._queues: dict[ThreadConnection, deque[RemotingCommand]] = {}
        # the processor table last looked at, and whether it holds a processor of the
        # user's (the transport's own stream handlers are in it from the start: they alone
        # do not make the server's requests come at any time)
        self._table_seen: object = None
        self._table_serves = False

    @property
    def loop(self) -> LoopThread | None:
        """The loop thread, once started."""
        return self._loop

    def serves(self) -> bool:
        """True while the server's requests are read at any time, not only while a call
        waits: a processor is registered, or a stream is open (its items come as requests).

        Asked each time a calling thread stops reading a connection: a client that only
        calls answers False here, and its background reader stays asleep."""
        endpoint = self._endpoint
        dispatcher = endpoint.dispatcher
        table = dispatcher.processors  # replaced, never mutated, when a processor registers
        if table is not self._table_seen:
            self._table_serves = any(e.handler is None for e in table.values())
            self._table_seen = table
        return (self._table_serves or dispatcher.default is not None
                or bool(endpoint.streams.incoming.open))

    def serve(self, conn: ThreadConnection, requests: list[RemotingCommand]) -> None:
        """Run ``requests`` (read from ``conn``) on the loop, starting it if needed (any
        thread). Once the client is shut down they are dropped: the connection is closing."""
        if not self._start():
            return
        try:
            self._endpoint.inbox.post(self._enqueue, (conn, requests))
        except RuntimeError:  # the loop has ended (shutdown)
            log.debug("requests.unprocessed", conn_id=conn.id, requests=len(requests),
                      reason="client shut down")

    def connection_lost(self, conn: ThreadConnection) -> None:
        """End the streams of ``conn`` (any thread; nothing to do if no loop ever ran)."""
        if self._loop is None:
            return
        try:  # streams see a thread-driven connection as they see a trio one
            self._endpoint.inbox.post(self._endpoint.streams.connection_lost, conn)
        except RuntimeError:  # the loop has ended: so have its streams
            pass

    def start(self) -> None:
        """Start the loop now if it is not running (a stream is about to be opened).

        Raises:
            RemotingError: the client is shut down.
        """
        if not self._start():
            raise RemotingError("RemotingClient is closed")

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

    # ------------------------------------------------------------------ on the loop

    def _enqueue(self, args: tuple[ThreadConnection, list[RemotingCommand]]) -> None:
        conn, requests = args
        if conn.closed:
            return
        queue = self._queues.get(conn)
        if queue is not None:  # a task is taking from it: in order, after what is there
            queue.extend(requests)
            return
        self._queues[conn] = deque(requests)
        try:
            self._endpoint.nursery.start_soon(self._dispatch, conn)
        except RuntimeError:  # the endpoint is ending: the connection closes with it
            del self._queues[conn]

    async def _dispatch(self, conn: ThreadConnection) -> None:
        """Dispatch ``conn``'s queue in order, as a connection's reader does: an async
        processor that suspends is finished by this task, and a new task takes the rest."""
        mark_reader_task()
        dispatcher = self._endpoint.dispatcher
        queue = self._queues[conn]
        while queue and not conn.closed:
            suspension = dispatcher.request_received(conn, queue.popleft())
            if suspension is not None:
                if queue:
                    self._endpoint.nursery.start_soon(self._dispatch, conn)
                else:
                    del self._queues[conn]
                    dispatcher.read_done(conn)
                await suspension.finish()
                return
        queue.clear()
        del self._queues[conn]
        dispatcher.read_done(conn)

