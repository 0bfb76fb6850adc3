"""`ChannelHandle`: a connection as processors and server push see it (thread-safe)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ... import _checks
from ..._errors import RemotingError

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import RemotingCommand

    from .._calling._caller import Caller
    from .._calling._future import ResponseFuture
    from .._trio_driver._connection import Connection
    from ._dispatch import Dispatcher

__all__ = ["ChannelHandle", "ChannelHost", "channel_of", "channels_of"]


class ChannelHost(Protocol):
    """What a handle needs from the endpoint that owns its connection."""

    @property
    def caller(self) -> Caller: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    def call_on_loop(self, fn: Callable[[], object]) -> bool: ...


class ChannelHandle:
    """A handle on one connection; implements `processors.Channel`.

    Blocking methods may be called from any thread except the event loop's; the ``*_async``
    methods are for trio tasks of the endpoint's loop (async processors).
    """

    __slots__ = ("_conn", "_host")

    def __init__(self, conn: Connection, host: ChannelHost) -> None:
        self._conn = conn
        self._host = host

    def __repr__(self) -> str:
        return f"<Channel {self.remote_addr}{'' if self.is_active else ' closed'}>"

    @property
    def remote_addr(self) -> str:
        """The peer's ``"ip:port"``."""
        return self._conn.remote_addr

    @property
    def is_active(self) -> bool:
        """False once the connection is closed."""
        return not self._conn.closed

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting to be sent to this peer (a peer that does not read makes it grow)."""
        return self._conn.queued_bytes

    @property
    def tls_version(self) -> str | None:
        """The TLS version in use (e.g. ``"TLSv1.3"``), or None for plain TCP."""
        return self._conn.tls_version

    @property
    def attributes(self) -> dict[str, object]:
        """Free-form per-connection data (e.g. the group a client registered under)."""
        return self._conn.attributes

    def close(self) -> None:
        """Close the connection (thread-safe).

        Raises:
            RemotingError: the endpoint is shut down (its connections are closed).
        """
        if not self._conn.request_close("closed by the application"):
            raise RemotingError("the endpoint is shut down", self.remote_addr)

    def write_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Send ``response`` to ``request`` (long polling); thread-safe, never blocks.

        Raises:
            TypeError: ``request`` or ``response`` is not a `RemotingCommand`.
            RemotingError: the endpoint is shut down.
        """
        _checks.command_of("request", request)
        _checks.command_of("response", response)
        conn = self._conn
        dispatcher = self._host.dispatcher
        # through the loop (the one door): the held request's bookkeeping and the
        # connection's send queue belong to the loop thread, and this may be any thread
        self._call_on_loop(lambda: dispatcher.write_response(conn, request, response))

    def _call_on_loop(self, fn: Callable[[], object]) -> None:
        if not self._host.call_on_loop(fn):
            raise RemotingError("the endpoint is shut down", self.remote_addr)

    def _check_thread(self, call: str) -> None:
        _checks.outside_trio(f"ChannelHandle.{call}",
                             f"`await ctx.channel.{call}_async(...)`")

    def invoke_sync(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Call the peer over this connection and wait (from a thread, not the loop)."""
        self._check_thread("invoke_sync")
        conn = self._conn
        return self._host.caller.invoke_sync(conn, conn.remote_addr, request, timeout)

    def invoke_async(self, request: RemotingCommand, timeout: float = 3.0,
                     callback: Callable[[ResponseFuture], object] | None = None
                     ) -> ResponseFuture:
        """Send a request over this connection; return its future (from a thread)."""
        # no thread check: it never blocks, so a trio task may call it too and await the
        # future it returns
        conn = self._conn
        return self._host.caller.invoke_async(conn, conn.remote_addr, request, timeout,
                                              callback)

    def invoke_oneway(self, request: RemotingCommand, timeout: float = 3.0) -> None:
        """Send a oneway request over this connection (from a thread)."""
        self._check_thread("invoke_oneway")
        conn = self._conn
        self._host.caller.invoke_oneway(conn, conn.remote_addr, request, timeout)

    async def invoke_sync_async(
        self, request: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        """Call the peer over this connection and wait (from a trio task)."""
        conn = self._conn
        return await self._host.caller.ainvoke_sync(conn, conn.remote_addr, request, timeout)

    async def invoke_async_async(
        self, request: RemotingCommand, timeout: float = 3.0,
        callback: Callable[[ResponseFuture], object] | None = None,
    ) -> ResponseFuture:
        """Send a request over this connection; return its future (from a trio task)."""
        conn = self._conn
        return await self._host.caller.ainvoke_async(conn, conn.remote_addr, request, timeout,
                                                     callback)

    async def invoke_oneway_async(self, request: RemotingCommand, timeout: float = 3.0) -> None:
        """Send a oneway request over this connection (from a trio task)."""
        conn = self._conn
        await self._host.caller.ainvoke_oneway(conn, conn.remote_addr, request, timeout)


def channel_of(channel: object, name: str = "channel") -> ChannelHandle:
    """Return ``channel`` if it is a channel of an endpoint (``server.channels()``,
    ``ctx.channel``).

    Raises:
        TypeError: it is not (an address is not a channel: a server only calls its clients
            back over their connections).
    """
    if not isinstance(channel, ChannelHandle):
        raise TypeError(f"{name} must be a channel from server.channels() or ctx.channel, "
                        f"got {type(channel).__name__}")
    return channel


def channels_of(channels: object) -> list[ChannelHandle]:
    """Return ``channels`` as a list of channels.

    Raises:
        TypeError: not an iterable of channels (the message gives the first bad item's index).
    """
    # a str is iterable: refused by type, or "host:port" would be checked one character at
    # a time and the error would name its first character
    if isinstance(channels, ChannelHandle | str | bytes) or not hasattr(channels, "__iter__"):
        raise TypeError(f"channels must be an iterable of channels, got "
                        f"{type(channels).__name__}")
    items = list(channels)
    for i, channel in enumerate(items):
        channel_of(channel, f"channels[{i}]")
    return items
