"""Base classes that services subclass, and the context a processor receives.

This module imports only `codec` (no trio, no sockets): a processor never sees the connection,
only a `Channel` through its `RequestContext`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from codec import RemotingCommand

__all__ = ["AsyncRequestProcessor", "Channel", "RequestContext", "RequestProcessor",
           "ServerStream", "StreamProcessor"]


class Channel(Protocol):
    """The peer connection as processors see it (implemented by the transport)."""

    @property
    def remote_addr(self) -> str:
        """The peer's ``"ip:port"``."""
        ...

    @property
    def is_active(self) -> bool:
        """False once the connection is closed."""
        ...

    def close(self) -> None:
        """Close the connection (thread-safe): its pending calls fail, the peer sees it close."""
        ...

    def write_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Send ``response`` to ``request`` later (long polling); thread-safe, never blocks.

        The response gets the request's opaque and the response flag. Dropped (and logged)
        if the connection is closed meanwhile.
        """
        ...

    def invoke_sync(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Call the peer back over this connection and wait, from a processor thread."""
        ...

    def invoke_oneway(self, request: RemotingCommand, timeout: float = 3.0) -> None:
        """Send a oneway request to the peer over this connection, from a processor thread."""
        ...

    async def invoke_sync_async(
        self, request: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        """Call the peer back over this connection, from an async processor."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestContext:
    """What a processor knows about the request it handles.

    Attributes:
        remote_addr: the peer's ``"ip:port"``.
        channel: the connection, to reply later or to invoke the peer back.
        peer_certificate_subject: the subject of the certificate the peer presented over TLS,
            verified, as an RFC 4514 string (``"CN=client.example,O=Example"``); None without
            TLS or without a certificate (a server with ``tls_client_auth="optional"``).
    """

    remote_addr: str
    channel: Channel
    peer_certificate_subject: str | None = None

    def write_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Reply to ``request`` later; for processors that returned None (long polling)."""
        self.channel.write_response(request, response)


class RequestProcessor(abc.ABC):
    """A synchronous processor; runs on the thread pool registered for its request code."""

    @abc.abstractmethod
    def process_request(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """Handle ``request`` and return the response, or None to reply later (or never).

        An exception becomes a SYSTEM_ERROR reply whose remark names it; it is logged once.
        """

    def reject_request(self) -> bool:
        """Return True to answer SYSTEM_BUSY ``[REJECTREQUEST]`` without running the processor."""
        return False


class AsyncRequestProcessor(abc.ABC):
    """A trio-native processor; awaited on the event loop (it must not block)."""

    @abc.abstractmethod
    async def process_request(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """Handle ``request`` and return the response, or None to reply later (or never)."""

    def reject_request(self) -> bool:
        """Return True to answer SYSTEM_BUSY ``[REJECTREQUEST]`` without running the processor."""
        return False


class ServerStream(Protocol):
    """The sending side of a credit-based stream, as a `StreamProcessor` sees it
    (implemented by the transport).

    The client grants credits; each item sent uses its ``cost`` of them (default 1), and the
    stream never sends beyond them: `send` waits (no thread, no polling) while they are too
    few. Cancelling the stream, or losing its connection, cancels the processor.
    """

    @property
    def stream_id(self) -> int:
        """The stream's id, chosen by the client (``streamId`` on every frame)."""
        ...

    @property
    def credits(self) -> int:
        """Credits available now."""
        ...

    async def wait_credits(self) -> int:
        """Wait until at least one credit is available; return how many are."""
        ...

    async def send(self, item: RemotingCommand, cost: int = 1) -> None:
        """Send ``item`` once ``cost`` credits are available (waiting for them), and the
        connection's queue is under its high water mark.

        The item travels as given, with its code set to ``StreamCode.ITEM``, marked oneway,
        and ``streamId`` (and ``cost`` when it is not 1) added to its ``ext_fields``.

        Raises:
            ValueError: ``cost`` is negative.
            remoting.RemotingCommandError: ``item`` cannot be encoded; nothing was sent.
        """
        ...

    def send_nowait(self, item: RemotingCommand, cost: int = 1) -> None:
        """Send ``item`` now if ``cost`` credits are available.

        Raises:
            trio.WouldBlock: fewer than ``cost`` credits are available; nothing was sent.
            ValueError, remoting.RemotingCommandError: as `send`.
        """
        ...

    def add_credits(self, credits: int) -> None:
        """Grant ``credits`` from this side, when the service's own protocol returns them
        (a queue's acknowledgements do).

        Raises:
            ValueError: ``credits`` is below 1 or would pass the window's maximum.
        """
        ...


class StreamProcessor(abc.ABC):
    """A trio-native processor that answers one request with a stream of commands.

    It runs as a task on the event loop for the stream's life, counted neither as a request
    in processing (so it holds no thread and no ``max_requests_per_connection`` slot) nor as
    one that graceful shutdown waits for: a draining server ends its streams with
    ``GO_AWAY``. The stream opens (the request is answered SUCCESS) when the processor first
    waits for credits or sends; returning ends it normally. Raising before that refuses the
    request (`remoting.AbortProcessError` chooses the code); raising after ends the stream
    with the error, which the client's iteration raises as `remoting.RemotingStreamError`.
    """

    @abc.abstractmethod
    async def process_stream(self, ctx: RequestContext, request: RemotingCommand,
                             stream: ServerStream) -> None:
        """Send the stream's items with ``stream.send``; return to end it."""

    def reject_request(self) -> bool:
        """Return True to answer SYSTEM_BUSY ``[REJECTREQUEST]`` without opening a stream."""
        return False
