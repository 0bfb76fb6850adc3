"""`BusClient`: a bus client over a blocking `RemotingClient` (plain methods, any thread)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final, Self

from .._checks import blocking_call
from .._errors import RemotingError, RemotingTimeoutError
from .._faces._blocking import RemotingClient
from ._client import BusClientBase, Keeper, transport_timeout
from ._node import deadline_after
from ._runners import HANDLER_THREADS, ThreadRunner
from ._waiter import ThreadWaiter
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

__all__ = ["BusClient"]

# What a blocking call of this module names as the way to do it in trio code.
_TRIO_BUS: Final = ("TrioBusClient(client, addr) over a TrioRemotingClient "
                    "(remoting.open_client()), whose methods are awaited")


class BusClient(BusClientBase):
    """A bus client over a blocking `RemotingClient` (plain methods, from any thread).

    ``BusClient(client, addr)`` uses the `EventBus` of the server at ``addr``. Handlers of
    its consumers run on threads of the bus client (``handler_threads``), one message at a
    time per consumer. `close` (or leaving a ``with`` block) unregisters its consumers and
    stops those threads; the `RemotingClient` is not closed.
    """

    def __init__(self, client: RemotingClient, addr: str, *,
                 handler_threads: int = HANDLER_THREADS) -> None:
        if not isinstance(client, RemotingClient):
            raise TypeError("BusClient needs a RemotingClient (a TrioRemotingClient: use "
                            f"TrioBusClient), got {type(client).__name__}")
        self._threads = ThreadRunner("remoting-bus-client", handler_threads)
        self._runner = self._threads
        self._stopped = threading.Event()
        self._wake = threading.Event()
        super().__init__(client, addr)
        self._blocking: RemotingClient = client

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Unregister the consumers (the server is told in the background) and stop the
        handler threads, waiting up to 5 s for handlers still running. Idempotent."""
        with self._node.lock:
            self._closed = True
            consumers = [*self._node.local.handlers(), *self._remote]
        self._stopped.set()
        self._wake.set()
        for consumer in consumers:
            consumer.unregister()
        self._threads.close()

    # ------------------------------------------------------------------ consumers

    @blocking_call("BusClient.consumer", _TRIO_BUS)
    def consumer(self, address: str, handler: Callable[[Message], object], *,
                 max_buffered: int = DEFAULT_MAX_BUFFERED,
                 on_discard: Callable[[Message], object] | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> Consumer:
        """Register ``handler`` (a plain function) at ``address`` on the bus server; it
        receives the messages any sender sends there. Returns once registered.

        Raises:
            TypeError, ValueError: a bad address, handler or ``max_buffered``.
            RemotingError: the server could not be reached (a `RemotingConnectError`...),
                serves no bus, or refused the consumer; the bus client is closed.
        """
        consumer = self._new_consumer(address, handler, max_buffered, on_discard, local=False)
        try:
            response = self._blocking.invoke_sync(self._addr, self._registration(consumer),
                                                timeout_of(timeout))
            self._check(response, consumer.address)
        except BaseException:
            self._unhooked(consumer)
            raise
        self._owed_after_registration(consumer)  # none: it held nothing yet
        self._registered(consumer)
        return consumer

    def local_consumer(self, address: str, handler: Callable[[Message], object], *,
                       max_buffered: int = DEFAULT_MAX_BUFFERED,
                       on_discard: Callable[[Message], object] | None = None) -> Consumer:
        """Register ``handler`` at ``address`` for this bus client's own messages only
        (Vert.x's ``localConsumer``): the server and other clients never reach it.

        Raises:
            TypeError, ValueError: a bad address, handler or ``max_buffered``.
        """
        return self._new_consumer(address, handler, max_buffered, on_discard, local=True)

    def _start_keeper(self) -> None:
        threading.Thread(target=self._keep, name="remoting-bus-keeper", daemon=True).start()

    def _wake_keeper(self) -> None:
        self._wake.set()

    def _keep(self) -> None:
        """Keep the consumers registered at the bus server (the keeper thread; `Keeper`
        says when), until the bus client closes."""
        keeper = Keeper()
        while True:
            self._wake.wait(keeper.wait)
            self._wake.clear()
            if self._stopped.is_set() or not self._blocking.is_running:
                return
            lost, consumers = self._keeping()
            failure = None
            try:
                if lost:
                    for consumer in consumers:
                        registration = self._registration(consumer)
                        self._check(self._blocking.invoke_sync(self._addr, registration,
                                                               DEFAULT_TIMEOUT), consumer.address)
                        owed = self._owed_after_registration(consumer)
                        if owed:
                            self.credit(consumer, owed)
                elif consumers:
                    self._blocking.invoke_oneway(self._addr, heartbeat_command(),
                                                 DEFAULT_TIMEOUT)
            except RemotingError as exc:  # the server cannot be reached yet
                failure = exc
            self._kept(keeper, lost, consumers, failure)

    def _remote_removed(self, consumer: Consumer) -> None:
        self._unhooked(consumer)
        try:
            self._blocking.invoke_async(self._addr, unregister_command(consumer.consumer_id),
                                        DEFAULT_TIMEOUT)
        except RemotingError:  # the client is closed: the server forgets it with its connection
            pass

    def credit(self, consumer: Consumer, credits: int) -> None:
        """`Credits`: tell the server ``consumer`` finished ``credits`` messages."""
        try:
            self._blocking.invoke_oneway(self._addr,
                                         credit_command(consumer.consumer_id, credits),
                                         DEFAULT_TIMEOUT)
        except RemotingError:  # the connection is gone, and the registration with it
            pass

    def resize(self, consumer: Consumer, window: int, credits: int,
               applied: Callable[[], object]) -> None:
        """`Credits`: tell the server ``consumer``'s new window, in the background."""
        try:
            self._blocking.invoke_async(self._addr,
                                        window_command(consumer.consumer_id, window, credits),
                                        DEFAULT_TIMEOUT, lambda _: applied())
        except RemotingError:  # the client is closed: the server forgets it with it
            applied()

    # ------------------------------------------------------------------ messages

    @blocking_call("BusClient.send", _TRIO_BUS)
    def send(self, address: str, body: bytes | None = None,
             headers: dict[str, str] | None = None, *,
             timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a message to one consumer of ``address`` (a local consumer of this bus
        client if it has one, else one the server chooses, round-robin). Returns once the
        consumer's bus has it: its handler runs it, or it waits in its buffer.

        Raises:
            ReplyFailure: NO_HANDLERS; RECIPIENT_FAILURE: the consumer is full, or went
                away before taking it; TIMEOUT: not taken within ``timeout`` seconds.
            RemotingError: the bus server could not be reached (a `RemotingConnectError`,
                `RemotingSendRequestError`...), or serves no bus; the bus client is closed.
            TypeError, ValueError: a bad argument; whatever an outbound interceptor raised.
        """
        self._check_open()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound("send", address, body, headers)
        with node.telemetry.sending(message):
            if self._send_locally(message):
                return
            self._call(send_command("send", message.address, message.body, message.headers,
                                    timeout), timeout, message.address)

    @blocking_call("BusClient.publish", _TRIO_BUS)
    def publish(self, address: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, *,
                timeout: float = DEFAULT_TIMEOUT) -> None:
        """Deliver a message to every consumer of ``address`` (this bus client's local ones,
        and every one the server knows). Returns once the server has routed it; none is no
        error.

        Raises:
            RemotingError: as `send`.
            TypeError, ValueError: a bad argument; whatever an outbound interceptor raised.
        """
        self._check_open()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound("publish", address, body, headers)
        with node.telemetry.sending(message):
            self._publish_locally(message)
            self._call(send_command("publish", message.address, message.body,
                                    message.headers, None), timeout, message.address)

    @blocking_call("BusClient.request", _TRIO_BUS)
    def request(self, address: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, *,
                timeout: float = DEFAULT_TIMEOUT) -> Message:
        """Send a message to one consumer of ``address`` and wait for its reply.

        Returns the reply, a `Message` (answer it in turn if its ``reply_address`` is set).

        Raises:
            ReplyFailure: NO_HANDLERS; TIMEOUT: no reply within ``timeout`` seconds;
                RECIPIENT_FAILURE: the handler raised or called ``fail``, the consumer is
                full, or it went away holding the message.
            RemotingError, TypeError, ValueError: as `send`.
        """
        self._check_open()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound("request", address, body, headers)
        with node.telemetry.sending(message):
            waiter = ThreadWaiter()
            entry = self._request_locally(message, waiter, deadline_after(timeout))
            if entry is not None:
                return node.wait_reply(waiter, entry)
            response = self._call(send_command("request", message.address, message.body,
                                               message.headers, timeout), timeout,
                                  message.address, check=False)
            return self._reply_of(response, message.address)

    def _call(self, command: RemotingCommand, timeout: float, address: str | None, *,
              check: bool = True) -> RemotingCommand:
        try:
            response = self._blocking.invoke_sync(self._addr, command, transport_timeout(timeout))
        except RemotingTimeoutError as exc:
            raise self._timed_out(address, exc) from exc
        if check:
            self._check(response, address)
        return response

    # ------------------------------------------------------------------ Replier

    def send_reply(self, reply_address: str, body: bytes, headers: dict[str, str],
                   failure: tuple[int, str] | None) -> None:
        """Answer a message the server delivered (never waits)."""
        message = self._node.outbound("fail" if failure else "reply", reply_address, body,
                                      headers)
        with self._node.telemetry.sending(message):
            self._blocking.invoke_async(self._addr, self._reply_command(message, failure, None),
                                        DEFAULT_TIMEOUT)

    @blocking_call("Message.reply_and_request", _TRIO_BUS)
    def reply_and_request(self, reply_address: str, body: bytes, headers: dict[str, str],
                          timeout: float) -> Message:
        """Answer a message the server delivered, and wait for the answer to that."""
        message = self._node.outbound("reply", reply_address, body, headers)
        with self._node.telemetry.sending(message):
            response = self._call(self._reply_command(message, None, timeout), timeout, None,
                                  check=False)
            return self._reply_of(response, None)

    async def reply_and_request_async(self, reply_address: str, body: bytes,
                                      headers: dict[str, str], timeout: float) -> Message:
        raise RuntimeError("a BusClient's handlers run on threads: call "
                           "message.reply_and_request(...)")
