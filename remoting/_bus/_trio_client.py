"""`TrioBusClient`: a bus client over a running `TrioRemotingClient` (async methods).

A thin face: each call is `BusClientBase`'s steps, driven in the calling task
(remoting/_steps.py); `BusClient` is its twin.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Self

from .._errors import RemotingError
from .._faces._trio import TrioRemotingClient
from .._steps import drive_async
from ._client import BusClientBase
from ._host import host_of
from ._runners import TaskRunner
from ._waiter import TaskWaiter
from ._wire import DEFAULT_MAX_BUFFERED, DEFAULT_MAX_BUFFERED_BYTES, DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from codec import RemotingCommand

    from ._consumer import Consumer
    from ._message import Message

__all__ = ["TrioBusClient"]


class TrioBusClient(BusClientBase):
    """A bus client over a running `TrioRemotingClient` (async methods, in its trio loop).

    ``TrioBusClient(client, addr)`` uses the `EventBus` of the server at ``addr``. Handlers
    of its consumers (plain or async functions) run as tasks of the client, one message at a
    time per consumer. ``aclose()`` (or leaving an ``async with`` block) unregisters its
    consumers; the client is not closed.
    """

    _wrong_face = ("a TrioBusClient's handlers are trio tasks: call "
                   "`await message.reply_and_request_async(...)`")

    def __init__(self, client: TrioRemotingClient, addr: str) -> None:
        if not isinstance(client, TrioRemotingClient):
            raise TypeError("TrioBusClient needs a TrioRemotingClient (a RemotingClient: use "
                            f"BusClient), got {type(client).__name__}")
        self._host = host_of(client)
        super().__init__(client, addr, TaskRunner(self._host), TaskWaiter)
        self._trio: TrioRemotingClient = client

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Unregister the consumers (the server is told in the background). Idempotent."""
        self._closing()

    async def consumer(self, address: str, handler: Callable[[Message], object], *,
                       max_buffered: int = DEFAULT_MAX_BUFFERED,
                       max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
                       on_discard: Callable[[Message], object] | None = None,
                       timeout: float = DEFAULT_TIMEOUT) -> Consumer:
        """Register ``handler`` (a plain or an async function) at ``address`` on the bus
        server (see `BusClient.consumer`)."""
        return await drive_async(self._register(address, handler, max_buffered,
                                                max_buffered_bytes, on_discard, timeout))

    async def local_consumer(self, address: str, handler: Callable[[Message], object], *,
                             max_buffered: int = DEFAULT_MAX_BUFFERED,
                             max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
                             on_discard: Callable[[Message], object] | None = None
                             ) -> Consumer:
        """Register ``handler`` for this bus client's own messages only (see
        `BusClient.local_consumer`)."""
        return self._new_consumer(address, handler, max_buffered, max_buffered_bytes,
                                  on_discard, local=True)

    async def send(self, address: str, body: bytes | None = None,
                   headers: dict[str, str] | None = None, *,
                   timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a message to one consumer of ``address`` (see `BusClient.send`)."""
        await drive_async(self._send("send", address, body, headers, timeout))

    async def publish(self, address: str, body: bytes | None = None,
                      headers: dict[str, str] | None = None, *,
                      timeout: float = DEFAULT_TIMEOUT) -> None:
        """Deliver a message to every consumer of ``address`` (see `BusClient.publish`)."""
        await drive_async(self._send("publish", address, body, headers, timeout))

    async def request(self, address: str, body: bytes | None = None,
                      headers: dict[str, str] | None = None, *,
                      timeout: float = DEFAULT_TIMEOUT) -> Message:
        """Send a message to one consumer of ``address`` and wait for its reply (see
        `BusClient.request`)."""
        return await drive_async(self._request(address, body, headers, timeout))

    def _start_keeper(self) -> None:
        self._host.spawn(drive_async, self._keep())

    def _tell(self, command: RemotingCommand, then: Callable[[], object] | None = None
              ) -> None:
        self._host.spawn(self._told, command, then)

    def _tell_oneway(self, command: RemotingCommand) -> None:
        self._host.spawn(self._told_oneway, command)

    async def _told_oneway(self, command: RemotingCommand) -> None:
        with suppress(RemotingError):  # not sent: the connection is gone, the message with it
            await self._trio.invoke_oneway(self._addr, command, DEFAULT_TIMEOUT)

    async def _told(self, command: RemotingCommand, then: Callable[[], object] | None) -> None:
        try:
            await self._trio.invoke_sync(self._addr, command, DEFAULT_TIMEOUT)
        except RemotingError:  # the connection is gone: the server forgot us with it
            pass
        finally:
            if then is not None:
                then()
