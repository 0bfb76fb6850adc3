"""`TrioBusClient`: a bus client over a running `TrioRemotingClient` (async methods)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

import trio

from .._errors import RemotingError, RemotingTimeoutError
from .._faces._trio import TrioRemotingClient
from ._client import BusClientBase, Keeper, transport_timeout
from ._host import host_of
from ._node import deadline_after
from ._runners import TaskRunner
from ._waiter import TaskWaiter
from ._wire import (
    DEFAULT_MAX_BUFFERED,
    DEFAULT_TIMEOUT,
    credit_command,
    heartbeat_command,
    send_command,
    timeout_of,
    unregister_command,
    window_command,
)

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

    def __init__(self, client: TrioRemotingClient, addr: str) -> None:
        if not isinstance(client, TrioRemotingClient):
            raise TypeError("TrioBusClient needs a TrioRemotingClient (a RemotingClient: use "
                            f"BusClient), got {type(client).__name__}")
        self._host = host_of(client)
        self._runner = TaskRunner(self._host)
        self._wake = trio.Event()
        super().__init__(client, addr)
        self._trio: TrioRemotingClient = client

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Unregister the consumers (the server is told in the background). Idempotent."""
        with self._node.lock:
            self._closed = True
            consumers = [*self._node.local.handlers(), *self._remote]
        self._wake.set()
        for consumer in consumers:
            consumer.unregister()

    # ------------------------------------------------------------------ consumers

    async def consumer(self, address: str, handler: Callable[[Message], object], *,
                       max_buffered: int = DEFAULT_MAX_BUFFERED,
                       on_discard: Callable[[Message], object] | None = None,
                       timeout: float = DEFAULT_TIMEOUT) -> Consumer:
        """Register ``handler`` (a plain or an async function) at ``address`` on the bus
        server (see `BusClient.consumer`)."""
        consumer = self._new_consumer(address, handler, max_buffered, on_discard, local=False)
        try:
            response = await self._trio.invoke_sync(self._addr, self._registration(consumer),
                                                timeout_of(timeout))
            self._check(response, consumer.address)
        except BaseException:
            self._unhooked(consumer)
            raise
        self._owed_after_registration(consumer)  # none: it held nothing yet
        self._registered(consumer)
        return consumer

    async def local_consumer(self, address: str, handler: Callable[[Message], object], *,
                             max_buffered: int = DEFAULT_MAX_BUFFERED,
                             on_discard: Callable[[Message], object] | None = None
                             ) -> Consumer:
        """Register ``handler`` for this bus client's own messages only (see
        `BusClient.local_consumer`)."""
        return self._new_consumer(address, handler, max_buffered, on_discard, local=True)

    def _start_keeper(self) -> None:
        self._host.spawn(self._keep)

    def _wake_keeper(self) -> None:
        self._host.call_on_loop(lambda: self._wake.set())

    async def _keep(self) -> None:
        """`BusClient._keep` as a task of the client."""
        keeper = Keeper()
        while True:
            with trio.move_on_after(keeper.wait):
                await self._wake.wait()
            self._wake = trio.Event()
            if self._closed:
                return
            lost, consumers = self._keeping()
            failure = None
            try:
                if lost:
                    for consumer in consumers:
                        registration = self._registration(consumer)
                        self._check(await self._trio.invoke_sync(self._addr, registration,
                                                                 DEFAULT_TIMEOUT), consumer.address)
                        owed = self._owed_after_registration(consumer)
                        if owed:
                            await self.credit_async(consumer, owed)
                elif consumers:
                    await self._trio.invoke_oneway(self._addr, heartbeat_command(),
                                                   DEFAULT_TIMEOUT)
            except RemotingError as exc:
                failure = exc
            self._kept(keeper, lost, consumers, failure)

    def _remote_removed(self, consumer: Consumer) -> None:
        self._unhooked(consumer)
        self._host.spawn(self._tell, unregister_command(consumer.consumer_id))

    async def _tell(self, command: RemotingCommand) -> None:
        try:
            await self._trio.invoke_sync(self._addr, command, DEFAULT_TIMEOUT)
        except RemotingError:  # the connection is gone: the server forgot us with it
            pass

    def credit(self, consumer: Consumer, credits: int) -> None:
        raise RuntimeError("a TrioBusClient's consumers credit from their tasks")

    async def credit_async(self, consumer: Consumer, credits: int) -> None:
        """`Credits`: tell the server ``consumer`` finished ``credits`` messages."""
        try:
            await self._trio.invoke_oneway(self._addr,
                                           credit_command(consumer.consumer_id, credits),
                                           DEFAULT_TIMEOUT)
        except RemotingError:  # the connection is gone, and the registration with it
            pass

    def resize(self, consumer: Consumer, window: int, credits: int,
               applied: Callable[[], object]) -> None:
        """`Credits`: tell the server ``consumer``'s new window, from a task."""
        self._host.spawn(self._resize, window_command(consumer.consumer_id, window, credits),
                         applied)

    async def _resize(self, command: RemotingCommand, applied: Callable[[], object]) -> None:
        try:
            await self._tell(command)
        finally:
            applied()

    # ------------------------------------------------------------------ messages

    async def send(self, address: str, body: bytes | None = None,
                   headers: dict[str, str] | None = None, *,
                   timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a message to one consumer of ``address`` (see `BusClient.send`)."""
        self._check_open()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound("send", address, body, headers)
        with node.telemetry.sending(message):
            if self._send_locally(message):
                return
            await self._call(send_command("send", message.address, message.body,
                                          message.headers, timeout), timeout, message.address)

    async def publish(self, address: str, body: bytes | None = None,
                      headers: dict[str, str] | None = None, *,
                      timeout: float = DEFAULT_TIMEOUT) -> None:
        """Deliver a message to every consumer of ``address`` (see `BusClient.publish`)."""
        self._check_open()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound("publish", address, body, headers)
        with node.telemetry.sending(message):
            self._publish_locally(message)
            await self._call(send_command("publish", message.address, message.body,
                                          message.headers, None), timeout, message.address)

    async def request(self, address: str, body: bytes | None = None,
                      headers: dict[str, str] | None = None, *,
                      timeout: float = DEFAULT_TIMEOUT) -> Message:
        """Send a message to one consumer of ``address`` and wait for its reply (see
        `BusClient.request`)."""
        self._check_open()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound("request", address, body, headers)
        with node.telemetry.sending(message):
            waiter = TaskWaiter()
            entry = self._request_locally(message, waiter, deadline_after(timeout))
            if entry is not None:
                return await node.wait_reply_async(waiter, entry)
            response = await self._call(send_command("request", message.address, message.body,
                                                     message.headers, timeout), timeout,
                                        message.address, check=False)
            return self._reply_of(response, message.address)

    async def _call(self, command: RemotingCommand, timeout: float, address: str | None, *,
                    check: bool = True) -> RemotingCommand:
        try:
            response = await self._trio.invoke_sync(self._addr, command,
                                                    transport_timeout(timeout))
        except RemotingTimeoutError as exc:
            raise self._timed_out(address, exc) from exc
        if check:
            self._check(response, address)
        return response

    # ------------------------------------------------------------------ Replier

    def send_reply(self, reply_address: str, body: bytes, headers: dict[str, str],
                   failure: tuple[int, str] | None) -> None:
        """Answer a message the server delivered (never waits: a task sends it)."""
        message = self._node.outbound("fail" if failure else "reply", reply_address, body,
                                      headers)
        with self._node.telemetry.sending(message):
            self._host.spawn(self._tell, self._reply_command(message, failure, None))

    def reply_and_request(self, reply_address: str, body: bytes, headers: dict[str, str],
                          timeout: float) -> Message:
        raise RuntimeError("a TrioBusClient's handlers are trio tasks: call "
                           "`await message.reply_and_request_async(...)`")

    async def reply_and_request_async(self, reply_address: str, body: bytes,
                                      headers: dict[str, str], timeout: float) -> Message:
        """Answer a message the server delivered, and wait for the answer to that."""
        message = self._node.outbound("reply", reply_address, body, headers)
        with self._node.telemetry.sending(message):
            response = await self._call(self._reply_command(message, None, timeout), timeout,
                                        None, check=False)
            return self._reply_of(response, None)
