"""`EventBus`: the bus of a server; it holds the address table every connected bus client
uses, and may have consumers of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from .._faces._blocking_server import RemotingServer
from .._faces._trio import TrioRemotingServer
from .._steps import drive, drive_async
from ._consumer import Consumer, check_callback, check_handler
from ._host import host_of
from ._interceptors import add_interceptor
from ._node import BusNode, deadline_after
from ._permissions import PermissionTable
from ._runners import HANDLER_THREADS, TaskRunner, ThreadRunner, handler_threads_of
from ._server import SERVED_CODES, BusServer, ServerLimits
from ._telemetry import NO_TELEMETRY, telemetry_for
from ._waiter import TaskWaiter, ThreadWaiter
from ._wire import (
    DEFAULT_MAX_BUFFERED,
    DEFAULT_MAX_BUFFERED_BYTES,
    DEFAULT_MAX_CONSUMERS,
    DEFAULT_MAX_HELD,
    DEFAULT_MAX_HELD_BYTES,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_WAITING,
    DEFAULT_TIMEOUT,
    address_of,
    count_of,
    max_buffered_bytes_of,
    max_buffered_of,
    timeout_of,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import TracebackType

    from .._steps import Steps
    from ._host import BusHost
    from ._interceptors import BusInterceptor
    from ._message import Message
    from ._permissions import AddressPermissions
    from ._runners import Runner
    from ._statistics import BusStatistics
    from ._waiter import Waiter

__all__ = ["EventBus"]


class EventBus:
    """The event bus of a server (Vert.x's ``EventBus``, spanning processes).

    ``bus.attach(server)`` serves the bus on a `RemotingServer` or a `TrioRemotingServer`:
    its address table then holds the consumers of every connected bus client
    (`BusClient`, `TrioBusClient`) and the server's own. Handlers of its own consumers run on
    threads of the bus (``handler_threads``) on a blocking server, and as trio tasks on a trio
    server.

    Args:
        max_queued_per_consumer: messages the server holds for one remote consumer whose
            window is full (beyond: sends fail as RECIPIENT_FAILURE, publishes are dropped).
        max_consumers: consumers of clients the bus holds, all clients together (beyond: a
            registration is refused with a reason).
        max_held_per_connection, max_held_bytes_per_connection: messages, and their bytes
            (body and headers), the server holds for one client connection's consumers
            together, queued or on their way (beyond: as a full consumer).
        max_waiting_per_connection: sends and requests of one client connection waiting
            for their outcome (a receipt, a reply, a failure) at most (default 4,096); one
            more is answered SYSTEM_BUSY at once (the client raises RECIPIENT_FAILURE).
        handler_threads: threads that run handlers on a blocking server.
        permissions: which addresses each ACL access key may consume at and send to
            (``{"shop": AddressPermissions(consume=["price"]), "*": ...}``; ``"*"``: every
            other key, and requests without one). None (the default): every client may
            consume at and send to every address. With permissions the server must verify
            access keys (an `AclServerRPCHook`); a request it cannot trust is refused.

    Raises:
        TypeError, ValueError: an option is not an int, or out of range; ``permissions`` is
            not a mapping of access keys to `AddressPermissions`.
    """

    def __init__(self, *, max_queued_per_consumer: int = DEFAULT_MAX_QUEUED,
                 max_consumers: int = DEFAULT_MAX_CONSUMERS,
                 max_held_per_connection: int = DEFAULT_MAX_HELD,
                 max_held_bytes_per_connection: int = DEFAULT_MAX_HELD_BYTES,
                 max_waiting_per_connection: int = DEFAULT_MAX_WAITING,
                 handler_threads: int = HANDLER_THREADS,
                 permissions: Mapping[str, AddressPermissions] | None = None) -> None:
        self._limits = ServerLimits(
            max_queued=count_of("max_queued_per_consumer", max_queued_per_consumer, 0),
            max_consumers=count_of("max_consumers", max_consumers, 1),
            max_held=count_of("max_held_per_connection", max_held_per_connection, 1),
            max_held_bytes=count_of("max_held_bytes_per_connection",
                                  max_held_bytes_per_connection, 1),
            max_waiting=count_of("max_waiting_per_connection", max_waiting_per_connection, 1))
        self._threads = handler_threads_of(handler_threads)
        self._permissions = None if permissions is None else PermissionTable(permissions)
        self._node = BusNode(NO_TELEMETRY, reply_prefix="")
        self._server: BusServer | None = None
        self._host: BusHost | None = None
        self._runner: Runner | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def attach(self, server: RemotingServer | TrioRemotingServer) -> None:
        """Serve the bus on ``server`` (before or after it starts), once.

        Raises:
            TypeError: ``server`` is not a `RemotingServer` or `TrioRemotingServer`.
            RuntimeError: the bus is attached already.
        """
        if not isinstance(server, RemotingServer | TrioRemotingServer):
            raise TypeError("attach needs a RemotingServer or a TrioRemotingServer, got "
                            f"{type(server).__name__}")
        if self._server is not None:
            raise RuntimeError("this EventBus is attached to a server already")
        host = self._host = host_of(server)
        if isinstance(server, RemotingServer):
            self._runner = ThreadRunner("remoting-bus-server", self._threads)
        else:
            self._runner = TaskRunner(host)
        self._node.telemetry = telemetry_for(server.config, self._node, "server")
        self._server = bus_server = BusServer(self._node, host, self._limits,
                                              self._permissions)
        for code in SERVED_CODES:
            server.register_processor(code, bus_server)

    def close(self) -> None:
        """Unregister the bus's own consumers and stop its handler threads (a blocking
        server's: waiting up to 5 s for handlers still running). Idempotent. The server keeps
        serving the bus to its clients until it stops."""
        node = self._node
        with node.lock:
            own = [c for c in (*node.local.handlers(), *node.shared.handlers())
                   if isinstance(c, Consumer)]
        for consumer in own:
            consumer.unregister()
        runner = self._runner
        if isinstance(runner, ThreadRunner):
            runner.close()

    def add_interceptor(self, interceptor: BusInterceptor) -> None:
        """Run ``interceptor`` on every message this bus sends and its consumers receive.

        Raises:
            TypeError: it is not a `BusInterceptor`.
        """
        add_interceptor(self._node.lock, self._node.interceptors, interceptor)

    def statistics(self) -> BusStatistics:
        """Return a snapshot of the bus's counters."""
        return self._node.statistics()

    # ------------------------------------------------------------------ consumers

    def consumer(self, address: str, handler: Callable[[Message], object], *,
                 max_buffered: int = DEFAULT_MAX_BUFFERED,
                 max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
                 on_discard: Callable[[Message], object] | None = None) -> Consumer:
        """Register ``handler`` at ``address``; every sender reaches it, bus clients too.

        ``handler(message)`` runs on a thread of the bus (a blocking server: a plain
        function) or as a trio task (a trio server: a plain or an async function).

        Raises:
            TypeError, ValueError: a bad address, handler or ``max_buffered``.
            RuntimeError: the bus is not attached to a server yet.
        """
        return self._consumer(address, handler, max_buffered, max_buffered_bytes,
                              on_discard, local=False)

    def local_consumer(self, address: str, handler: Callable[[Message], object], *,
                       max_buffered: int = DEFAULT_MAX_BUFFERED,
                       max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
                       on_discard: Callable[[Message], object] | None = None) -> Consumer:
        """Register ``handler`` at ``address`` for this bus's own messages only: bus clients
        do not reach it (Vert.x's ``localConsumer``). Raises as `consumer`."""
        return self._consumer(address, handler, max_buffered, max_buffered_bytes,
                              on_discard, local=True)

    def _consumer(self, address: str, handler: Callable[[Message], object], max_buffered: int,
                  max_buffered_bytes: int, on_discard: Callable[[Message], object] | None, *,
                  local: bool) -> Consumer:
        runner = self._attached_runner()
        address = address_of(address)
        check_handler(handler, runner.blocking)
        consumer = Consumer(self._node, runner, address, handler,
                            max_buffered=max_buffered_of(max_buffered),
                            max_buffered_bytes=max_buffered_bytes_of(max_buffered_bytes),
                            local=local,
                            on_discard=check_callback(on_discard, runner.blocking))
        self._node.add_consumer(consumer, shared=True)
        return consumer

    def _attached_runner(self) -> Runner:
        if self._runner is None:
            raise RuntimeError("attach the EventBus to a server first: bus.attach(server)")
        return self._runner

    def _off_loop(self, name: str, async_name: str) -> None:
        """Raises:
            RuntimeError: called on the server's event loop, which must not block.
        """
        host = self._host
        if host is not None and host.on_loop():
            raise RuntimeError(f"EventBus.{name} blocks: on the event loop use "
                               f"`await bus.{async_name}(...)`")

    def _bus_server(self) -> BusServer:
        if self._server is None:
            raise RuntimeError("attach the EventBus to a server first: bus.attach(server)")
        return self._server

    # ------------------------------------------------------------------ messages

    def send(self, address: str, body: bytes | None = None,
             headers: dict[str, str] | None = None, *,
             timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a message to one consumer of ``address`` (its own local consumers first,
        else any, round-robin), and wait until the consumer's bus has it: a consumer of this
        process at once, a client's when its receipt comes (a thread: not the event loop's;
        on a trio server use `send_async`).

        Raises:
            ReplyFailure: NO_HANDLERS; RECIPIENT_FAILURE: the consumer is full, or went away
                before taking it; TIMEOUT: not taken within ``timeout`` seconds (it may still
                be handled).
            RuntimeError: called on the server's event loop thread.
            TypeError, ValueError: a bad argument; whatever an outbound interceptor raised.
        """
        server = self._bus_server()
        self._off_loop("send", "send_async")
        drive(self._send(server, address, body, headers, timeout, ThreadWaiter()))

    async def send_async(self, address: str, body: bytes | None = None,
                         headers: dict[str, str] | None = None, *,
                         timeout: float = DEFAULT_TIMEOUT) -> None:
        """`send` for a trio task of the server's loop (a `TrioRemotingServer`'s bus)."""
        server = self._bus_server()
        await drive_async(self._send(server, address, body, headers, timeout, TaskWaiter()))

    def _send(self, server: BusServer, address: str, body: object, headers: object,
              timeout: float, waiter: Waiter) -> Steps[None]:
        timeout = timeout_of(timeout)
        message = self._node.outbound("send", address, body, headers)
        with self._node.telemetry.sending(message):
            yield from server.sending(message.address, message.body, message.headers,
                                      deadline_after(timeout), waiter, here=True)

    def publish(self, address: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> None:
        """Deliver a message to every consumer of ``address``; from any thread or task.
        None is no error (counted as ``unrouted_publishes``, as Vert.x).

        Raises:
            TypeError, ValueError: a bad argument; whatever an outbound interceptor raised.
        """
        server = self._bus_server()
        node = self._node
        message = node.outbound("publish", address, body, headers)
        with node.telemetry.sending(message):
            server.publish(message.address, message.body, message.headers, here=True)

    def request(self, address: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, *,
                timeout: float = DEFAULT_TIMEOUT) -> Message:
        """Send a message to one consumer of ``address`` and wait for its reply (a thread:
        not the event loop's; on a trio server use `request_async`).

        Returns the reply, a `Message` (answer it in turn if its ``reply_address`` is set).

        Raises:
            ReplyFailure: NO_HANDLERS, TIMEOUT (``timeout`` seconds), or RECIPIENT_FAILURE.
            RuntimeError: called on the server's event loop thread.
            TypeError, ValueError: a bad argument; whatever an outbound interceptor raised.
        """
        server = self._bus_server()
        self._off_loop("request", "request_async")
        return drive(self._request(server, address, body, headers, timeout, ThreadWaiter()))

    async def request_async(self, address: str, body: bytes | None = None,
                            headers: dict[str, str] | None = None, *,
                            timeout: float = DEFAULT_TIMEOUT) -> Message:
        """`request` for a trio task of the server's loop (a `TrioRemotingServer`'s bus)."""
        server = self._bus_server()
        return await drive_async(self._request(server, address, body, headers, timeout,
                                               TaskWaiter()))

    def _request(self, server: BusServer, address: str, body: object, headers: object,
                 timeout: float, waiter: Waiter) -> Steps[Message]:
        timeout = timeout_of(timeout)
        message = self._node.outbound("request", address, body, headers)
        with self._node.telemetry.sending(message):
            return (yield from server.requesting(message.address, message.body,
                                                 message.headers, deadline_after(timeout),
                                                 waiter, here=True))
