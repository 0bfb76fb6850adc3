"""`BusClient`: a bus client over a blocking `RemotingClient` (plain methods, any thread).

A thin face: each call is `BusClientBase`'s steps, driven in the calling thread
(remoting/_steps.py); `TrioBusClient` is its twin.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final, Self

from .._checks import blocking_call
from .._errors import RemotingError
from .._faces._blocking import RemotingClient
from .._steps import drive
from ._client import BusClientBase
from ._runners import HANDLER_THREADS, ThreadRunner
from ._waiter import ThreadWaiter
from ._wire import DEFAULT_MAX_BUFFERED, DEFAULT_MAX_BUFFERED_BYTES, DEFAULT_TIMEOUT

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

    _wrong_face = "a BusClient's handlers run on threads: call message.reply_and_request(...)"

    def __init__(self, client: RemotingClient, addr: str, *,
                 handler_threads: int = HANDLER_THREADS) -> None:
        if not isinstance(client, RemotingClient):
            raise TypeError("BusClient needs a RemotingClient (a TrioRemotingClient: use "
                            f"TrioBusClient), got {type(client).__name__}")
        self._threads = ThreadRunner("remoting-bus-client", handler_threads)
        super().__init__(client, addr, self._threads, ThreadWaiter)
        self._blocking: RemotingClient = client

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Unregister the consumers (the server is told in the background) and stop the
        handler threads, waiting up to 5 s for handlers still running. Idempotent."""
        self._closing()
        self._threads.close()

    @blocking_call("BusClient.consumer", _TRIO_BUS)
    def consumer(self, address: str, handler: Callable[[Message], object], *,
                 max_buffered: int = DEFAULT_MAX_BUFFERED,
                 max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
                 on_discard: Callable[[Message], object] | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> Consumer:
        """Register ``handler`` (a plain function) at ``address`` on the bus server; it
        receives the messages any sender sends there. Returns once registered.

        Raises:
            TypeError, ValueError: a bad address, handler or ``max_buffered``.
            RemotingError: the server could not be reached (a `RemotingConnectError`...),
                serves no bus, or refused the consumer; the bus client is closed.
        """
        return drive(self._register(address, handler, max_buffered, max_buffered_bytes,
                                    on_discard, timeout))

    def local_consumer(self, address: str, handler: Callable[[Message], object], *,
                       max_buffered: int = DEFAULT_MAX_BUFFERED,
                       max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
                       on_discard: Callable[[Message], object] | None = None) -> Consumer:
        """Register ``handler`` at ``address`` for this bus client's own messages only
        (Vert.x's ``localConsumer``): the server and other clients never reach it.

        Raises:
            TypeError, ValueError: a bad address, handler or ``max_buffered``.
        """
        return self._new_consumer(address, handler, max_buffered, max_buffered_bytes,
                                  on_discard, local=True)

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
        drive(self._send("send", address, body, headers, timeout))

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
        drive(self._send("publish", address, body, headers, timeout))

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
        return drive(self._request(address, body, headers, timeout))

    def _start_keeper(self) -> None:
        threading.Thread(target=drive, args=(self._keep(),), name="remoting-bus-keeper",
                         daemon=True).start()

    def _serving(self) -> bool:
        return self._blocking.is_running

    def _tell(self, command: RemotingCommand, then: Callable[[], object] | None = None
              ) -> None:
        try:
            self._blocking.invoke_async(self._addr, command, DEFAULT_TIMEOUT,
                                        None if then is None else lambda _: then())
        except RemotingError:  # the client is closed: the server forgets it with it
            if then is not None:
                then()

    def _tell_oneway(self, command: RemotingCommand) -> None:
        # as a call whose answer is ignored, not a oneway frame: the thread driver's calls
        # made while others are in flight leave together, after its next read, while each
        # oneway frame is a socket write of its own (bench/bus.py, pipelined request: 0.80
        # writes per message in the consumer against 0.23)
        self._tell(command)
