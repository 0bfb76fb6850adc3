"""`ChannelHandle`: a connection as processors and server push see it (thread-safe)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .._errors import RemotingError
from ._dispatch import finish_response

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import RemotingCommand

    from ._connection import Connection
    from ._future import ResponseFuture

__all__ = ["ChannelHandle"]


class ChannelHandle:
    """A handle on one connection; implements `processors.Channel`.

    Blocking methods may be called from any thread except the event loop's; the ``*_async``
    methods are for trio tasks (async processors).
    """

    __module__ = "remoting"
    __slots__ = ("_conn",)

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __repr__(self) -> str:
        return f"<Channel {self.remote_addr}{'' if self.is_active else ' closed'}>"

    @property
    def remote_addr(self) -> str:
        return self._conn.remote_addr

    @property
    def is_active(self) -> bool:
        return not self._conn.closed

    @property
    def attributes(self) -> dict[str, object]:
        """Free-form per-connection data (e.g. the group a client registered under)."""
        return self._conn.attributes

    def close(self) -> None:
        """Close the connection (thread-safe)."""
        self._call_in_loop(lambda: self._conn.close("closed by the application"))

    def write_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Send ``response`` to ``request`` (long polling); thread-safe, never blocks."""
        frame = finish_response(request, response)
        if frame is not None:
            self._call_in_loop(lambda: self._conn.write_response_frame(frame))

    def _call_in_loop(self, fn: Callable[[], object]) -> None:
        if not self._conn.endpoint.call_on_loop(fn):
            raise RemotingError("the endpoint is shut down", self.remote_addr)

    def _check_thread(self) -> None:
        if threading.get_ident() == self._conn.endpoint.loop_thread_id:
            raise RuntimeError(
                "blocking channel calls cannot be made from the event loop's thread: in an "
                "async processor use `await ctx.channel.invoke_sync_async(...)`"
            )

    def invoke_sync(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Call the peer over this connection and wait (from a thread, not the loop)."""
        self._check_thread()
        return self.invoke_async(request, timeout).result()

    def invoke_async(self, request: RemotingCommand, timeout: float = 3.0) -> ResponseFuture:
        """Send a request over this connection; return its future (from a thread)."""
        return self._conn.endpoint.submit_from_thread(self._conn, request, timeout, "async")

    def invoke_oneway(self, request: RemotingCommand, timeout: float = 3.0) -> None:
        """Send a oneway request over this connection (from a thread)."""
        self._check_thread()
        self._conn.endpoint.submit_from_thread(self._conn, request, timeout, "oneway").result()

    async def invoke_sync_async(
        self, request: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        """Call the peer over this connection and wait (from a trio task)."""
        return await self._conn.endpoint.invoke(self._conn, request, timeout)

    async def invoke_oneway_async(self, request: RemotingCommand, timeout: float = 3.0) -> None:
        """Send a oneway request over this connection (from a trio task)."""
        await self._conn.endpoint.invoke_oneway(self._conn, request, timeout)
