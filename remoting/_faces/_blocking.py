"""The blocking faces: `RemotingClient` and `RemotingServer` for threads, scripts and Spark.

Each runs the trio core in one daemon thread and forwards calls into it through the endpoint's
inbox (one batched ``run_sync_soon`` hand-off per call, no task on the fast path). Timeouts are
enforced inside trio. Calling a blocking method from the loop's own thread would deadlock, so it
raises `RuntimeError`; trio code should use `remoting.open_client` / `open_server` instead.
"""

from __future__ import annotations

import _thread
import os
import threading
import time
from typing import TYPE_CHECKING, Any, NoReturn

import trio

from codec import ResponseCode

from .._config import ClientConfig, ServerConfig
from .._core._invoke import busy_backoff
from .._core._thread_calls import try_invoke_sync_from_thread
from .._errors import RemotingError
from ._trio import (
    DEFAULT_TIMEOUT,
    TrioRemotingClient,
    TrioRemotingServer,
    run_after_hooks,
    run_before_hooks,
    with_after_hooks,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from concurrent.futures import Executor
    from types import TracebackType

    from codec import RemotingCommand
    from processors import AsyncRequestProcessor, RequestProcessor

    from .._core._channel import ChannelHandle
    from .._core._endpoint import Endpoint
    from .._core._events import ChannelEventListener
    from .._core._future import ResponseFuture
    from .._hooks import RPCHook
    from .._observability._statistics import EndpointStatistics

__all__ = ["RemotingClient", "RemotingServer"]

JOIN_TIMEOUT = 10.0


class _LoopThread:
    """A daemon thread running ``trio.run`` around one long-lived ``serve`` coroutine."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.result: Any = None

    def start(self, serve: Callable[..., Any]) -> Any:
        self._thread = threading.Thread(
            target=self._run, args=(serve,), name=self.name, daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self.result

    def _run(self, serve: Callable[..., Any]) -> None:
        try:
            trio.run(self._main, serve)
        except BaseException as exc:  # reported to start(); nothing else can see it
            self._error = exc
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
        if self.token is not None and self._scope is not None:
            scope = self._scope
            try:
                self.token.run_sync_soon(scope.cancel)
            except trio.RunFinishedError:
                pass
        if join and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_TIMEOUT)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class _BlockingBase:
    _core: TrioRemotingClient | TrioRemotingServer
    _loop: _LoopThread | None
    _closed: bool

    @property
    def endpoint(self) -> Endpoint:
        return self._core.endpoint

    def register_processor(
        self, code: int, processor: RequestProcessor | AsyncRequestProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve requests with ``code`` (see `TrioRemotingServer.register_processor`)."""
        self._core.register_processor(code, processor, executor, threads=threads)

    def register_default_processor(
        self, processor: RequestProcessor | AsyncRequestProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve every code that has no processor of its own."""
        self._core.register_default_processor(processor, executor, threads=threads)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Run ``hook`` around every call."""
        self._core.register_rpc_hook(hook)

    def register_channel_event_listener(self, listener: ChannelEventListener) -> None:
        """Receive connect/close/exception/idle events, in order, off the event loop."""
        self._core.register_channel_event_listener(listener)

    def statistics(self) -> EndpointStatistics:
        """Return a frozen snapshot of the counters."""
        return self._core.statistics()

    def _check_caller(self) -> None:
        if self._closed:
            raise RemotingError(f"{type(self).__name__} is closed")
        if self._loop is None:
            raise RemotingError(f"{type(self).__name__} is not started: call start() first")
        if not self._loop.alive:
            raise RemotingError(f"{type(self).__name__}'s event loop has stopped; create a new one")
        if threading.get_ident() == self.endpoint.loop_thread_id:
            raise RuntimeError(
                "blocking remoting calls cannot be made from the event loop's thread "
                "(use the trio-native client or an async processor's channel methods)"
            )

    def __enter__(self) -> Any:
        self.start()  # type: ignore[attr-defined]
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()  # type: ignore[attr-defined]

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"a {type(self).__name__} cannot be pickled (it owns sockets and a thread): ship "
            "its config instead and create the client where it runs (remoting.spark does this)"
        )


class RemotingClient(_BlockingBase):
    """A thread-safe blocking client (RocketMQ's NettyRemotingClient)."""

    __module__ = "remoting"

    def __init__(self, config: ClientConfig | None = None) -> None:
        self.config = config or ClientConfig()
        self._core = TrioRemotingClient(self.config)
        self._loop: _LoopThread | None = None
        self._closed = False
        self._lock = threading.Lock()
        self.pid = os.getpid()

    def start(self) -> RemotingClient:
        """Start the client's loop thread (idempotent)."""
        with self._lock:
            if self._closed:
                raise RemotingError("RemotingClient is closed")
            if self._loop is None:
                loop = _LoopThread("remoting-client")
                loop.start(self._core.serve)
                self._loop = loop
        return self

    def shutdown(self) -> None:
        """Close connections, fail pending calls, join the threads (idempotent).

        Called from one of the client's callbacks or processors, it does not wait for the
        threads: the loop's thread joins them, this one included, once it returns.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.stop(join=not self.endpoint.in_own_thread())

    close = shutdown

    @property
    def is_running(self) -> bool:
        """True between `start` and `shutdown`."""
        return self._loop is not None and self._loop.alive

    def update_name_server_address_list(self, addrs: list[str]) -> None:
        """Set the addresses used by calls with ``addr=None`` (round-robin, failover)."""
        self.endpoint.update_name_server_address_list(addrs)

    def get_name_server_address_list(self) -> list[str]:
        """Return the address list."""
        return list(self.endpoint.name_servers)

    def invoke_sync(self, addr: str | None, request: RemotingCommand,
                    timeout: float = DEFAULT_TIMEOUT, *, retry_busy: bool = False
                    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for the response.

        Args:
            addr: ``"host:port"``, or None for the address list (with failover).
            request: the command; its opaque is replaced if already in flight.
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
        """
        self._check_caller()
        ep = self.endpoint
        if ep.hooks:
            run_before_hooks(ep, addr, request)
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            remaining = timeout if not attempt else deadline - time.monotonic()
            fut = (try_invoke_sync_from_thread(ep, addr, request, remaining)
                   or ep.submit_from_thread(addr, request, remaining, "sync"))
            response = fut.result()
            if not retry_busy or response.code != ResponseCode.SYSTEM_BUSY:
                break
            attempt += 1
            pause = busy_backoff(attempt)
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
        if ep.hooks:
            run_after_hooks(ep, fut.addr, request, response)
        return response

    def invoke_async(self, addr: str | None, request: RemotingCommand,
                     timeout: float = DEFAULT_TIMEOUT,
                     callback: Callable[[ResponseFuture], object] | None = None
                     ) -> ResponseFuture:
        """Send ``request``; return its `ResponseFuture` at once.

        ``callback(future)`` runs exactly once on the callback executor: after the response,
        a send failure, a timeout or a connection loss. Failures go into the future.
        """
        self._check_caller()
        ep = self.endpoint
        if ep.hooks:
            run_before_hooks(ep, addr, request)
            callback = with_after_hooks(ep, request, callback)
        return ep.submit_from_thread(addr, request, timeout, "async", callback)

    def invoke_oneway(self, addr: str | None, request: RemotingCommand,
                      timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send ``request`` with no answer expected; returns once the frame is queued.

        Raises:
            RemotingConnectError, RemotingTimeoutError, RemotingTooManyRequestsError,
            RemotingSendRequestError: before the frame could be queued.
        """
        self._check_caller()
        ep = self.endpoint
        if ep.hooks:
            run_before_hooks(ep, addr, request)
        ep.submit_from_thread(addr, request, timeout, "oneway").result()

    def invoke_many(self, addr: str | None, requests: Sequence[RemotingCommand],
                    timeout: float = DEFAULT_TIMEOUT, limit: int = 64
                    ) -> list[RemotingCommand | RemotingError]:
        """Send all ``requests`` in one hand-off to the loop, at most ``limit`` in flight.

        Each request has its own ``timeout``. Returns one entry per request, in order: the
        response or the `RemotingError` that ended it. Hooks are not run for batch calls.
        """
        self._check_caller()
        lock = _thread.allocate_lock()
        lock.acquire()
        box: list[list[RemotingCommand | RemotingError]] = []

        def on_done(results: list[RemotingCommand | RemotingError]) -> None:
            box.append(results)
            lock.release()

        self.endpoint.submit_many_from_thread(addr, requests, timeout, limit, on_done)
        n = len(requests)
        waves = (n + max(1, limit) - 1) // max(1, limit)
        if not lock.acquire(timeout=timeout * max(1, waves) + 30.0):
            raise RemotingError("invoke_many: the event loop did not finish the batch", addr)
        return box[0]


class RemotingServer(_BlockingBase):
    """A blocking server (RocketMQ's NettyRemotingServer); ``port`` is set by `start`."""

    __module__ = "remoting"
    _core: TrioRemotingServer

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config or ServerConfig()
        self._core = TrioRemotingServer(self.config)
        self._loop: _LoopThread | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._stopper: threading.Thread | None = None  # a shutdown begun by a processor

    @property
    def port(self) -> int:
        """The listening port (after `start`)."""
        if self._core.port is None:
            raise RemotingError("RemotingServer is not started")
        return self._core.port

    @property
    def addr(self) -> str:
        """``"bind_address:port"``, for clients on this machine."""
        return f"{self.config.bind_address}:{self.port}"

    def start(self) -> RemotingServer:
        """Bind, listen and serve in a background thread (idempotent)."""
        with self._lock:
            if self._closed:
                raise RemotingError("RemotingServer is closed")
            if self._loop is None:
                self._core.bind()  # RemotingStartError in the caller's thread, if any
                loop = _LoopThread("remoting-server")
                loop.start(self._core.serve)
                self._loop = loop
        return self

    def shutdown(self, grace: float | None = None) -> None:
        """Stop gracefully and join every thread (idempotent; fast when idle).

        Stops accepting, answers GO_AWAY to new requests, lets running processors finish for
        up to ``grace`` seconds (default ``config.shutdown_grace_seconds``), then closes the
        connections and fails whatever is still pending.

        Called from one of the server's processors or callbacks (an admin "stop" request), it
        starts the shutdown in a thread of its own and returns at once: the caller is one of
        the processors the shutdown waits for, and its response still goes out. A later call
        from another thread waits for that shutdown to end.
        """
        own_thread = self.endpoint.in_own_thread()
        with self._lock:
            stopper = self._stopper
            if self._closed:
                loop = None
            else:
                self._closed = True
                loop, self._loop = self._loop, None
                if loop is not None and own_thread:
                    stopper = self._stopper = threading.Thread(
                        target=self._stop, args=(loop, grace),
                        name="remoting-server-shutdown", daemon=True,
                    )
                    stopper.start()
                    return
        if loop is not None:
            self._stop(loop, grace)
        elif stopper is not None and not own_thread:
            stopper.join()  # bounded: the grace period plus the threads' join deadlines

    def _stop(self, loop: _LoopThread, grace: float | None) -> None:
        if loop.token is not None:
            try:
                trio.from_thread.run(self._core.shutdown, grace, trio_token=loop.token)
            except trio.RunFinishedError:
                pass
        loop.stop()

    def broadcast_oneway(self, channels: Sequence[ChannelHandle], request: RemotingCommand
                         ) -> int:
        """Send one oneway ``request`` to every channel; return how many got it."""
        self._check_caller()
        conns = [c._conn for c in channels]
        box: list[int] = []
        assert self._loop is not None
        assert self._loop.token is not None
        trio.from_thread.run_sync(
            lambda: box.append(self.endpoint.broadcast_oneway(conns, request)),
            trio_token=self._loop.token,
        )
        return box[0]

    def channels(self) -> list[ChannelHandle]:
        """Return the live connections (for server push)."""
        return self._core.channels()

    def invoke_sync(self, channel: ChannelHandle, request: RemotingCommand,
                    timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Call a connected client (which registered a processor) and wait."""
        self._check_caller()
        return channel.invoke_sync(request, timeout)

    def invoke_async(self, channel: ChannelHandle, request: RemotingCommand,
                     timeout: float = DEFAULT_TIMEOUT,
                     callback: Callable[[ResponseFuture], object] | None = None
                     ) -> ResponseFuture:
        """Call a connected client; return the future."""
        self._check_caller()
        return self.endpoint.submit_from_thread(
            channel._conn, request, timeout, "async", callback
        )

    def invoke_oneway(self, channel: ChannelHandle, request: RemotingCommand,
                      timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a oneway request to a connected client."""
        self._check_caller()
        channel.invoke_oneway(request, timeout)
