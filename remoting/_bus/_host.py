"""`BusHost`: everything the bus needs from the transport's core, in one protocol, and the
one adapter that provides it over an `Endpoint` (`host_of`).

The bus otherwise uses only the faces' public API (``register_processor``,
``invoke_*``...). What it needs beyond that is here: its own tasks and hand-offs on the
endpoint's event loop (trio handlers, a bus client's keeper, a server's waits for room),
pushes to a server's clients that take no in-flight permit and complete by a callback on the
loop (the bus's per-consumer window bounds them: `Outlet`), and word of a closed connection
on the loop itself (the channel listeners' queue is bounded and may drop events). A change of
the core touches `EndpointHost` only.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from .._security._acl import AclServerRPCHook

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractContextManager

    from codec import RemotingCommand

    from .._core._endpoint import Endpoint
    from .._core._receiving._channel_handle import ChannelHandle
    from .._faces._blocking import RemotingClient
    from .._faces._blocking_server import RemotingServer
    from .._faces._trio import TrioRemotingClient, TrioRemotingServer

__all__ = ["BusHost", "EndpointHost", "host_of"]


class BusHost(Protocol):
    """What the bus needs from the endpoint of a server or a trio client."""

    def on_loop(self) -> bool:
        """True on the endpoint's event loop thread."""
        ...

    def call_on_loop(self, fn: Callable[[], object]) -> bool:
        """Run ``fn()`` on the loop: now if called there, else soon (any thread). False,
        without running it, once the loop has ended."""
        ...

    def after_read(self, fn: Callable[[], object]) -> bool:
        """Run ``fn()`` on the loop once the read of requests being handled there ends
        (after the rest of its requests); outside such a read, or from another thread, soon
        (then after what the running task does meanwhile). False, without running it, once
        the loop has ended."""
        ...

    def bundled(self, channel: ChannelHandle) -> AbstractContextManager[None]:
        """Within it, what is pushed to ``channel``'s peer is only queued; on leaving, it
        leaves together, in one write, once the running task lets the connection's writer
        run (with what else was pushed there by then; loop only)."""
        ...

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Start ``fn(*args)`` as a task of the endpoint (any thread); nothing once it
        stopped."""
        ...

    def push(self, channel: ChannelHandle, request: RemotingCommand, timeout: float,
             on_done: Callable[[RemotingCommand | None, BaseException | None], object]
             ) -> None:
        """Send ``request`` to the peer of ``channel`` with no in-flight permit; call
        ``on_done(response, cause)`` once, on the loop, when it ends. Loop only."""
        ...

    def push_oneway(self, channel: ChannelHandle, request: RemotingCommand,
                    timeout: float) -> None:
        """Queue a oneway ``request`` to the peer of ``channel``, with no permit. Loop only.

        Raises:
            RemotingError: not sent (the connection closed, or it cannot be encoded).
        """
        ...

    def has_room(self, channel: ChannelHandle) -> bool:
        """True while the bytes queued for ``channel``'s peer are under the high water mark."""
        ...

    async def wait_room(self, channel: ChannelHandle) -> None:
        """Wait until ``channel`` has room again, or closed. Loop only."""
        ...

    def watch_closes(self, fn: Callable[[ChannelHandle], object]) -> None:
        """Call ``fn(channel)`` on the loop for each connection that closes, before the
        channel listeners hear of it."""
        ...

    def verifies_access_keys(self) -> bool:
        """True if an `AclServerRPCHook` checks every request's signature (so its
        ``AccessKey`` is the signer's)."""
        ...


class EndpointHost:
    """`BusHost` over an `Endpoint`: the only part of the bus that knows the core."""

    __slots__ = ("_endpoint",)

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint

    def on_loop(self) -> bool:
        return threading.get_ident() == self._endpoint.loop_thread_id

    def call_on_loop(self, fn: Callable[[], object]) -> bool:
        return self._endpoint.call_on_loop(fn)

    def after_read(self, fn: Callable[[], object]) -> bool:
        return self._endpoint.after_read(fn)

    def bundled(self, channel: ChannelHandle) -> AbstractContextManager[None]:
        return self._endpoint.bundled(channel)

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        endpoint = self._endpoint

        def start() -> None:
            try:
                endpoint.nursery.start_soon(fn, *args)
            except RuntimeError:  # it stopped: its connections and tasks are gone
                pass

        endpoint.call_on_loop(start)

    def push(self, channel: ChannelHandle, request: RemotingCommand, timeout: float,
             on_done: Callable[[RemotingCommand | None, BaseException | None], object]
             ) -> None:
        self._endpoint.notify(channel, request, timeout, on_done)

    def push_oneway(self, channel: ChannelHandle, request: RemotingCommand,
                    timeout: float) -> None:
        self._endpoint.notify_oneway(channel, request, timeout)

    def has_room(self, channel: ChannelHandle) -> bool:
        return self._endpoint.has_room(channel)

    async def wait_room(self, channel: ChannelHandle) -> None:
        await self._endpoint.wait_room(channel)

    def watch_closes(self, fn: Callable[[ChannelHandle], object]) -> None:
        endpoint = self._endpoint
        # replaced, never mutated: the loop may be iterating over it now
        endpoint.close_watchers = [*endpoint.close_watchers, fn]


    def verifies_access_keys(self) -> bool:
        return any(isinstance(hook, AclServerRPCHook)
                   for hook in self._endpoint.dispatcher.hooks)


def host_of(face: RemotingServer | TrioRemotingServer | RemotingClient | TrioRemotingClient
            ) -> BusHost:
    """Return the `BusHost` of a server or client face."""
    return EndpointHost(face.endpoint)
