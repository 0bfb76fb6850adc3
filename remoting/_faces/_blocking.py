"""The blocking client, `RemotingClient`, for threads, scripts and Spark (and what the blocking
faces share, `BlockingFace`; the server is in `_blocking_server`).

A `RemotingClient` drives its calls with one driver, a `ClientIO` picked by ``io`` when it is
made (`_client_io`): the calling threads drive the connections (``io="threads"``), or every
call is handed to the trio core running in one daemon thread (``io="loop"``). The blocking
server always runs its core in a loop thread.
A blocking call made in any thread that runs trio (a loop's own, or an application's
``trio.run``) would stall that loop until its timeout, so it raises `RuntimeError` at once
(`outside_trio`); trio code uses `remoting.open_client` / `open_server` instead.
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from time import monotonic
from typing import TYPE_CHECKING, Any, NoReturn, Self, TypeVar

from .._checks import config_of, loop_thread_refused, outside_trio
from .._config import ClientConfig
from .._core._loop_thread import JOIN_TIMEOUT, LoopThread, on_loop
from .._errors import RemotingError
from ._client_io import CLIENT_IO
from ._streams import BlockingStream, open_blocking_stream
from ._trio import DEFAULT_TIMEOUT, TrioRemotingClient, TrioRemotingServer, register_interceptor

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from concurrent.futures import Executor
    from types import TracebackType

    from codec import RemotingCommand
    from processors import AsyncRequestProcessor, RequestProcessor, StreamProcessor

    from .._core._calling._future import ResponseFuture
    from .._core._endpoint import Endpoint
    from .._core._events import ChannelEventListener
    from .._hooks import RPCHook
    from .._interceptors import ClientInterceptor, ServerInterceptor
    from .._observability._statistics import EndpointStatistics
    from ._client_io import ClientIO

__all__ = ["BlockingFace", "RemotingClient"]

T = TypeVar("T")


class BlockingFace:
    _core: TrioRemotingClient | TrioRemotingServer
    _closed: bool
    _lock: threading.Lock

    @property
    def endpoint(self) -> Endpoint:
        return self._core.endpoint

    @property
    def _running_loop(self) -> LoopThread | None:
        """The loop thread that runs the endpoint now, if any."""
        raise NotImplementedError

    def register_processor(
        self, code: int, processor: RequestProcessor | AsyncRequestProcessor | StreamProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve requests with ``code`` (see `TrioRemotingServer.register_processor`)."""
        self._core.register_processor(code, processor, executor, threads=threads)

    def register_default_processor(
        self, processor: RequestProcessor | AsyncRequestProcessor | StreamProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve every code that has no processor of its own."""
        self._core.register_default_processor(processor, executor, threads=threads)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Run ``hook`` around every call.

        Raises:
            TypeError: ``hook`` lacks ``do_before_request`` or ``do_after_response``.
        """
        self._core.register_rpc_hook(hook)

    def register_interceptor(self, interceptor: ClientInterceptor | ServerInterceptor) -> None:
        """Run ``interceptor`` around every call it is made for; register before `start`
        (see `TrioRemotingClient.register_interceptor`)."""
        register_interceptor(self.endpoint, interceptor)

    def register_channel_event_listener(self, listener: ChannelEventListener) -> None:
        """Receive connect/close/exception/idle events, in order, off the event loop."""
        self._core.register_channel_event_listener(listener)

    def statistics(self) -> EndpointStatistics:
        """Return a frozen snapshot of the counters (taken on the loop thread while it runs)."""
        return self._on_loop(self._core.statistics)

    def _on_loop(self, fn: Callable[[], T]) -> T:
        """Return ``fn()`` computed on the loop thread while it runs, else here."""
        return on_loop(self.endpoint, self._running_loop, fn)

    def _on_loop_thread(self) -> bool:
        return threading.get_ident() == self.endpoint.loop_thread_id

    def _in_own_thread(self) -> bool:
        """True on the loop thread or a thread of the endpoint's pools or callbacks: threads a
        shutdown stops or joins, so one called there must not wait for them."""
        return self._on_loop_thread() or self.endpoint.in_own_thread()

    def _refuse_loop_thread(self) -> None:
        if self._on_loop_thread():
            raise loop_thread_refused()

    def start(self) -> Self:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"a {type(self).__name__} cannot be pickled (it owns sockets and a thread): ship "
            "its config instead and create the client where it runs (remoting.spark does this)"
        )


class RemotingClient(BlockingFace):
    """A thread-safe blocking client (RocketMQ's NettyRemotingClient).

    With ``ClientConfig(io="threads")`` (the default) the calling threads drive the
    connections themselves: a thread sends its request and reads the answers for everyone
    while it waits (`_core._thread_driver`); one background thread reads when nobody waits,
    and an event loop thread starts only if the server sends the client requests. With
    ``io="loop"`` every call is handed to an event loop running in a thread of its own.
    """

    _core: TrioRemotingClient

    def __init__(self, config: ClientConfig | None = None) -> None:
        self.config = config_of(config, ClientConfig)
        self._core = TrioRemotingClient(self.config)
        self._caller = self._core.endpoint.caller
        self._closed = False
        self._lock = threading.Lock()
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._stop_deadline = 0.0  # (monotonic) when every shutdown call has waited long enough
        self.pid = os.getpid()
        self._io = CLIENT_IO[self.config.io](self._core, self.config)  # its driver, once

    @property
    def _running_loop(self) -> LoopThread | None:
        return self._io.loop

    def start(self) -> Self:
        """Start the client (idempotent): with ``io="loop"`` its loop thread; with
        ``io="threads"`` nothing needs to run until the first call.

        A started client collected without `shutdown` is shut down then, with a
        `ResourceWarning` (as an unclosed file); its threads hold no reference to it.
        """
        with self._lock:
            if self._closed:
                raise RemotingError("RemotingClient is closed")
            if self._io.start():
                self._finalizer = weakref.finalize(self, _collected_unclosed, self._io, self.pid)
                self._finalizer.atexit = False  # at exit, daemon threads end with the process
        return self

    def shutdown(self) -> None:
        """Close connections, fail pending calls, join the threads (idempotent).

        Every call returns once the shutdown is complete, a call made while another thread's
        is running included, within `JOIN_TIMEOUT` of the first call (a loop thread still
        running then is left behind, logged as ``loop.still_running``). Called from one of
        the client's callbacks or processors (async ones included, on the loop thread), it
        does not wait for the threads: they are joined, this one included, once it returns.
        """
        own_thread = self._in_own_thread()
        with self._lock:
            first = not self._closed
            self._closed = True
            if first:
                self._stop_deadline = monotonic() + JOIN_TIMEOUT
        deadline = self._stop_deadline
        if first:
            if self._finalizer is not None:
                self._finalizer.detach()
            self._io.stop(deadline, wait=not own_thread)
        elif not own_thread:
            self._io.wait_stopped(deadline)

    close = shutdown

    @property
    def is_running(self) -> bool:
        """True between `start` and `shutdown`."""
        return not self._closed and self._io.running

    def _check_caller(self) -> None:
        if self._closed:
            raise RemotingError("RemotingClient is closed")
        self._io.check_caller()  # (the rest is its driver's: one call per call)

    def statistics(self) -> EndpointStatistics:
        """Return a frozen snapshot of the counters."""
        return self._io.statistics()

    def register_processor(
        self, code: int, processor: RequestProcessor | AsyncRequestProcessor | StreamProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve the server's requests with ``code`` (see
        `TrioRemotingServer.register_processor`)."""
        super().register_processor(code, processor, executor, threads=threads)
        self._io.serving_changed()

    def register_default_processor(
        self, processor: RequestProcessor | AsyncRequestProcessor | StreamProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve every code of the server's requests that has no processor of its own."""
        super().register_default_processor(processor, executor, threads=threads)
        self._io.serving_changed()

    def update_name_server_address_list(self, addrs: list[str]) -> None:
        """Set the addresses used by calls with ``addr=None`` (round-robin, failover).

        Raises:
            TypeError: ``addrs`` is a single string, not a list of them.
            RemotingConnectError: an address is not ``"host:port"``.
        """
        self._io.set_addresses(addrs)

    def get_name_server_address_list(self) -> list[str]:
        """Return the address list."""
        return self._io.addresses()

    @property
    def current_name_server(self) -> str | None:
        """The address from the list that ``addr=None`` calls use now (None: not chosen yet)."""
        return self._io.current_address

    def invoke_sync(self, addr: str | None, request: RemotingCommand,
                    timeout: float = DEFAULT_TIMEOUT, *, retry_busy: bool = False
                    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for the response.

        Args:
            addr: ``"host:port"``, or None for the address list (with failover).
            request: the command, never changed (in flight already, a copy with an opaque
                of its own goes out).
            timeout: seconds for the whole call, connect included.
            retry_busy: resend after SYSTEM_BUSY replies, with backoff, within the timeout
                (only for requests that are safe to repeat).

        Returns the response whatever its code (a non-SUCCESS code is data).

        Raises:
            RemotingConnectError: no connection could be made; nothing was sent.
            RemotingTimeoutError: no response within ``timeout`` seconds (connect included).
                With ``close_socket_if_timeout`` the connection is closed (as RocketMQ).
            RemotingSendRequestError: the write failed or the connection broke.
            RemotingTooManyRequestsError: no permit, or the peer does not drain its socket.
            RemotingCommandError: the request cannot be encoded.
            RemotingError: the client is closed or not started.
            TypeError, ValueError: ``request`` is not a `RemotingCommand`, or ``timeout`` is
                not a number of seconds >= 0 (NaN, -1); nothing was sent.
            RuntimeError: called in a thread that runs trio (use the trio client there).
        """
        outside_trio("RemotingClient.invoke_sync")
        self._check_caller()
        return self._caller.invoke_sync(addr, addr, request, timeout, retry_busy)

    def invoke_async(self, addr: str | None, request: RemotingCommand,
                     timeout: float = DEFAULT_TIMEOUT,
                     callback: Callable[[ResponseFuture], object] | None = None
                     ) -> ResponseFuture:
        """Send ``request``; return its `ResponseFuture` at once.

        ``callback(future)`` runs exactly once on the callback executor: after the response,
        a send failure, a timeout or a connection loss. Failures go into the future.
        """
        self._check_caller()
        return self._caller.invoke_async(addr, addr, request, timeout, callback)

    def invoke_oneway(self, addr: str | None, request: RemotingCommand,
                      timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send ``request`` with no answer expected; returns once the frame is queued.

        Raises:
            RemotingConnectError, RemotingTimeoutError, RemotingTooManyRequestsError,
            RemotingSendRequestError: before the frame could be queued.
            RuntimeError: called in a thread that runs trio (use the trio client there).
        """
        outside_trio("RemotingClient.invoke_oneway")
        self._check_caller()
        self._caller.invoke_oneway(addr, addr, request, timeout)

    def invoke_many(self, addr: str | None, requests: Sequence[RemotingCommand],
                    timeout: float = DEFAULT_TIMEOUT, limit: int = 64
                    ) -> list[RemotingCommand | RemotingError]:
        """Send all ``requests`` in one hand-off to the loop, at most ``limit`` in flight.

        Each request has its own ``timeout``. Returns one entry per request, in order: the
        response or the `RemotingError` that ended it. Interceptors run once per batch; RPC
        hooks as for one call, on each request: every before-hook on every request before any
        is sent (one that raises fails the whole call, as in `invoke_sync`, and nothing is
        sent), the after-hooks on each response once the batch is done.

        Raises:
            RuntimeError: called in a thread that runs trio (use the trio client there).
        """
        outside_trio("RemotingClient.invoke_many")
        self._check_caller()
        return self._caller.invoke_many(addr, addr, requests, timeout, limit)

    def open_stream(self, addr: str | None, request: RemotingCommand, credits: int = 64,
                    timeout: float = DEFAULT_TIMEOUT, *, auto_credit: bool = True
                    ) -> BlockingStream:
        """Send ``request`` to a `processors.StreamProcessor`; return its stream once open:
        ``with client.open_stream(addr, request) as stream: for item in stream: ...``.

        Arguments as `TrioRemotingClient.open_stream`. Leaving the ``with`` block (or
        ``stream.close()``) before the stream's end cancels it on the server.

        Raises:
            RemotingStreamError, RemotingConnectError, RemotingTimeoutError,
            RemotingSendRequestError, RemotingTooManyRequestsError, RemotingCommandError,
            TypeError, ValueError: as `TrioRemotingClient.open_stream`.
            RemotingError: the client is closed or not started.
        """
        self._check_caller()
        self._io.opening_stream()
        stream = open_blocking_stream(self.endpoint, addr, request, credits, timeout,
                                      auto_credit)
        self._io.serving_changed()  # its items come at any time
        return stream


def _collected_unclosed(io: ClientIO, pid: int) -> None:
    """Shut down a started `RemotingClient` collected without `shutdown` (in whichever thread
    collected it: see `ClientIO.collected`). A forked child dropping its parent's client
    leaves it alone: its threads are the parent's."""
    if os.getpid() != pid:
        return
    io.collected()  # first: a warning turned into an error must not skip it
    warnings.warn("a started RemotingClient was collected without shutdown(); it is shut "
                  "down now", ResourceWarning, stacklevel=1)
