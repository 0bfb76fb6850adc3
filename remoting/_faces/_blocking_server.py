"""The blocking server, `RemotingServer` (RocketMQ's NettyRemotingServer), for threads and scripts.

It runs a `TrioRemotingServer` in a daemon thread (`LoopThread`); see `_blocking`.
"""

from __future__ import annotations

import threading
from time import monotonic
from typing import TYPE_CHECKING, Self

import trio

from codec import FLAG_RESPONSE

from .._checks import config_of, grace_seconds, outside_trio, the_request
from .._config import ServerConfig
from .._core._loop_thread import JOIN_TIMEOUT, LOOP_ANSWER_SECONDS, LoopThread
from .._core._receiving._channel_handle import channel_of, channels_of
from .._errors import RemotingError
from ._blocking import BlockingFace
from ._trio import DEFAULT_TIMEOUT, TrioRemotingServer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from codec import RemotingCommand

    from .._core._calling._future import ResponseFuture
    from .._core._receiving._channel_handle import ChannelHandle

__all__ = ["RemotingServer"]


class RemotingServer(BlockingFace):
    """A blocking server (RocketMQ's NettyRemotingServer); ``port`` is set by `start`."""

    _core: TrioRemotingServer

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config_of(config, ServerConfig)
        self._core = TrioRemotingServer(self.config)
        self._loop: LoopThread | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._stopper: threading.Thread | None = None  # a shutdown begun by a processor
        self._stopping: LoopThread | None = None  # the loop a shutdown stops; kept once it ended
        self._stop_deadline = 0.0  # (monotonic) when every shutdown call has waited long enough

    @property
    def _running_loop(self) -> LoopThread | None:
        return self._loop

    def _check_caller(self) -> None:
        if self._closed:
            raise RemotingError("RemotingServer is closed")
        if self._loop is None:
            raise RemotingError("RemotingServer is not started: call start() first")
        if not self._loop.alive:
            raise RemotingError("RemotingServer's event loop has stopped; create a new one")
        self._refuse_loop_thread()

    def _claim_stop(self, bound: float) -> tuple[LoopThread | None, float, bool]:
        """Close the face; return the loop to stop (None: never started), the deadline of
        its end (``bound`` seconds after the first call) and whether this call is the first,
        the one that stops it. Every later call waits for the same loop until then."""
        with self._lock:
            first = not self._closed
            if first:
                self._closed = True
                self._stopping, self._loop = self._loop, None
                self._stop_deadline = monotonic() + bound
            return self._stopping, self._stop_deadline, first

    @property
    def port(self) -> int:
        """The listening port (after `start`).

        Raises:
            RemotingError: the server is not started.
        """
        try:
            return self._core.port
        except RemotingError:
            raise RemotingError("RemotingServer is not started: call start() first") from None

    @property
    def addr(self) -> str:
        """``"bind_address:port"``, for clients on this machine."""
        return f"{self.config.bind_address}:{self.port}"

    def start(self) -> Self:
        """Bind, listen and serve in a background thread (idempotent).

        Raises:
            RemotingStartError: the port cannot be bound (raised here, in the caller's thread).
        """
        with self._lock:
            if self._closed:
                raise RemotingError("RemotingServer is closed")
            if self._loop is None:
                self._core.bind()
                loop = LoopThread("remoting-server")
                loop.start(self._core.serve)
                self._loop = loop
        return self

    def drain(self) -> None:
        """Answer GO_AWAY to every new request from now on (see `TrioRemotingServer.drain`);
        in effect when this returns."""
        self._on_loop(self._core.drain)

    @property
    def draining(self) -> bool:
        """True once `drain` (or `shutdown`) began."""
        return self._core.draining

    def shutdown(self, grace: float | None = None) -> None:
        """Stop gracefully and join every thread (idempotent; fast when idle).

        Stops accepting, answers GO_AWAY to new requests, lets running processors finish for
        up to ``grace`` seconds (default ``config.shutdown_grace_seconds``), then closes the
        connections and fails whatever is still pending.

        Every call returns once the shutdown is complete, a call made while another thread's
        is running included, within the first call's grace period plus `JOIN_TIMEOUT` (a
        loop thread still running then is left behind, logged as ``loop.still_running``).

        Called from one of the server's processors (sync, or async on the loop thread) or
        callbacks (an admin "stop" request), it starts the shutdown in a thread of its own and
        returns at once: the caller is one of the processors the shutdown waits for, and its
        response still goes out. A later call from another thread waits for that shutdown to
        end.

        Raises:
            TypeError, ValueError: ``grace`` is not a number of seconds >= 0.
        """
        grace = grace_seconds(grace)
        own_thread = self._in_own_thread()
        wait = self.config.shutdown_grace_seconds if grace is None else grace
        loop, deadline, first = self._claim_stop(wait + JOIN_TIMEOUT)
        if loop is None:
            return
        if first and own_thread:
            self._stopper = stopper = threading.Thread(
                target=self._stop, args=(loop, grace, deadline),
                name="remoting-server-shutdown", daemon=True)
            stopper.start()
        elif first and trio.lowlevel.in_trio_run():  # trio.from_thread refuses a trio thread
            self._stopper = stopper = threading.Thread(
                target=self._stop, args=(loop, grace, deadline),
                name="remoting-server-shutdown", daemon=True)
            stopper.start()
            stopper.join(max(0.0, deadline - monotonic()))
        elif first:
            self._stop(loop, grace, deadline)
        elif not own_thread:
            loop.join(deadline)
            if self._stopper is not None:  # set before the loop could end
                self._stopper.join(max(0.0, deadline - monotonic()))

    def _stop(self, loop: LoopThread, grace: float | None, deadline: float) -> None:
        """Shut the core down gracefully, then end the loop whatever happened and wait for it
        until ``deadline`` (never called on the loop thread: `shutdown` hands that case to a
        thread of its own)."""
        try:
            if loop.token is not None:
                trio.from_thread.run(self._core.shutdown, grace, trio_token=loop.token)
        except trio.RunFinishedError:
            pass
        finally:
            loop.stop(join=False)
            loop.join(deadline)

    def broadcast_oneway(self, channels: Sequence[ChannelHandle], request: RemotingCommand
                         ) -> int:
        """Send one oneway ``request`` to every channel; return how many got it (see
        `TrioRemotingServer.broadcast_oneway`)."""
        self._check_caller()
        the_request(request, FLAG_RESPONSE)
        handles = channels_of(channels)
        core = self._core
        return self.endpoint.inbox.call(lambda: core.broadcast_oneway(handles, request),
                                        LOOP_ANSWER_SECONDS)

    def channels(self) -> list[ChannelHandle]:
        """Return the live connections (for server push)."""
        return self._on_loop(self._core.channels)

    def invoke_sync(self, channel: ChannelHandle, request: RemotingCommand,
                    timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Call a connected client (which registered a processor) and wait.

        Raises:
            RuntimeError: called in a thread that runs trio (use `TrioRemotingServer`).
        """
        outside_trio("RemotingServer.invoke_sync", "TrioRemotingServer")
        self._check_caller()
        return channel_of(channel).invoke_sync(request, timeout)

    def invoke_async(self, channel: ChannelHandle, request: RemotingCommand,
                     timeout: float = DEFAULT_TIMEOUT,
                     callback: Callable[[ResponseFuture], object] | None = None
                     ) -> ResponseFuture:
        """Call a connected client; return the future."""
        self._check_caller()
        return channel_of(channel).invoke_async(request, timeout, callback)

    def invoke_oneway(self, channel: ChannelHandle, request: RemotingCommand,
                      timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a oneway request to a connected client.

        Raises:
            RuntimeError: called in a thread that runs trio (use `TrioRemotingServer`).
        """
        outside_trio("RemotingServer.invoke_oneway", "TrioRemotingServer")
        self._check_caller()
        channel_of(channel).invoke_oneway(request, timeout)
