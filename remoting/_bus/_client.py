"""Bus clients: `BusClient` over a blocking `RemotingClient`, `TrioBusClient` over a trio one.

A bus client talks to the `EventBus` of one server (``addr``) through the client's public
calls: its sends, publishes, requests and replies are calls of the bus's codes; its
consumers are registered there, and the server pushes their messages back over the client's
connection (DELIVER), which the client's `ClientHub` hands to them. Local consumers stay in
the bus client: only its own messages reach them, with no network in between.
"""

from __future__ import annotations

import itertools
import math
import threading
import weakref
from typing import TYPE_CHECKING, Final, Self

import trio

from codec import ResponseCode
from processors import AsyncRequestProcessor

from .._errors import RemotingError, RemotingTimeoutError
from .._faces._blocking import RemotingClient
from .._faces._trio import TrioRemotingClient
from .._log import log
from ._consumer import Consumer, check_callback, check_handler
from ._failure import ReplyFailure
from ._interceptors import add_interceptor
from ._message import Message
from ._node import BusNode, consumer_full, deadline_after
from ._runners import HANDLER_THREADS, TaskRunner, ThreadRunner
from ._telemetry import spans_for
from ._waiter import TaskWaiter, ThreadWaiter
from ._wire import (
    DEFAULT_MAX_BUFFERED,
    DEFAULT_TIMEOUT,
    HEARTBEAT_SECONDS,
    TRANSPORT_MARGIN,
    BadBusRequest,
    BusCode,
    address_of,
    bad_request_response,
    credit_command,
    deliver_of,
    failure_of,
    failure_response,
    headers_in,
    heartbeat_command,
    max_buffered_of,
    not_registered_response,
    ok_response,
    register_command,
    reply_command,
    reply_in,
    send_command,
    timeout_of,
    unregister_command,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

    from codec import RemotingCommand
    from processors import RequestContext

    from ._interceptors import BusInterceptor
    from ._message import OutboundMessage, Replier
    from ._reply_table import PendingReply
    from ._runners import Runner
    from ._statistics import BusStatistics
    from ._waiter import Waiter

__all__ = ["BusClient", "ClientHub", "TrioBusClient"]

FIRST_PAUSE: Final = 0.05  # seconds before registering again, after a failed attempt
MAX_PAUSE: Final = 5.0  # the longest pause between attempts (doubling from FIRST_PAUSE)
_consumer_ids = itertools.count(1)  # process-wide: consumers of every bus client differ
_hubs: weakref.WeakKeyDictionary[object, ClientHub] = weakref.WeakKeyDictionary()
_hubs_lock: Final = threading.Lock()


class ClientHub(AsyncRequestProcessor):
    """The DELIVER processor of one transport client: hands what a bus server pushes to the
    consumer it names, of whichever bus client of that transport client."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._consumers: dict[int, tuple[Consumer, Replier]] = {}

    @classmethod
    def of(cls, client: RemotingClient | TrioRemotingClient) -> ClientHub:
        """Return ``client``'s hub, registering it for DELIVER on first use."""
        with _hubs_lock:
            hub = _hubs.get(client)
            if hub is None:
                hub = _hubs[client] = cls()
                client.register_processor(BusCode.DELIVER, hub)
            return hub

    def add(self, consumer: Consumer, replier: Replier) -> None:
        with self._lock:
            self._consumers[consumer.consumer_id] = (consumer, replier)

    def remove(self, consumer: Consumer) -> None:
        with self._lock:
            self._consumers.pop(consumer.consumer_id, None)

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        try:
            push = deliver_of(request)
        except BadBusRequest as exc:
            log.warning("bus.request_refused", code=request.code, peer=ctx.remote_addr,
                        reason=str(exc))
            return bad_request_response(exc)
        with self._lock:
            found = self._consumers.get(push.consumer_id)
        if found is None:
            return not_registered_response()
        consumer, replier = found
        taken = consumer.offer(Message(address=push.address, body=push.body,
                                       headers=push.headers, kind=push.kind,
                                       reply_address=push.reply_address, replier=replier))
        if taken == "accepted":
            return ok_response()
        if taken == "gone":
            return not_registered_response()
        return failure_response(consumer_full(push.address))


def transport_timeout(timeout: float) -> float:
    """The timeout of a bus call's transport request: the bus's plus a margin (see
    `TRANSPORT_MARGIN`)."""
    return timeout if math.isinf(timeout) else timeout + TRANSPORT_MARGIN


class _BusClient:
    """What both bus clients share: the node, the hub, local routing, reading answers."""

    _runner: Runner

    def __init__(self, client: RemotingClient | TrioRemotingClient, addr: str) -> None:
        if not isinstance(addr, str) or ":" not in addr:
            raise TypeError(f"addr must be a 'host:port' str, got {addr!r}")
        self._client = client
        self._addr = addr
        self._node = BusNode(spans_for(client.config), reply_prefix="local.")
        self._node.on_remote_removed = self._remote_removed
        self._hub = ClientHub.of(client)
        self._remote: set[Consumer] = set()
        self._closed = False
        self._lost = False  # the server forgot the consumers: register them again
        self._keeper_started = False
        client.register_channel_event_listener(_ConnectionWatch(self))

    @property
    def addr(self) -> str:
        """The bus server's address."""
        return self._addr

    def add_interceptor(self, interceptor: BusInterceptor) -> None:
        """Run ``interceptor`` on every message this bus client sends and its consumers
        receive.

        Raises:
            TypeError: it is not a `BusInterceptor`.
        """
        add_interceptor(self._node.lock, self._node.interceptors, interceptor)

    def statistics(self) -> BusStatistics:
        """Return a snapshot of this bus client's counters."""
        return self._node.statistics()

    def _remote_removed(self, consumer: Consumer) -> None:
        raise NotImplementedError

    def connection_lost(self) -> None:
        """The connection to the bus server closed, and the server forgot this client's
        consumers with it: have the keeper register them again. Called on the client's
        event thread."""
        with self._node.lock:
            if self._closed or not self._remote:
                return
            self._lost = True
        self._wake_keeper()

    def _wake_keeper(self) -> None:
        raise NotImplementedError

    def _start_keeper(self) -> None:
        raise NotImplementedError

    def _keeping(self) -> tuple[bool, list[Consumer]]:
        """Return (whether the consumers must be registered again, those still registered),
        and clear the first."""
        with self._node.lock:
            lost, self._lost = self._lost, False
            return lost, [c for c in self._remote if c.registered]

    def _register_failed(self, exc: RemotingError, consumers: int, first: bool) -> None:
        with self._node.lock:
            self._lost = True  # try again after a pause
        if first:
            log.warning("bus.registration_lost", addr=self._addr, consumers=consumers,
                        error=type(exc).__name__)

    def _check_open(self) -> None:
        """Raises:
            RemotingError: the bus client is closed.
        """
        if self._closed:
            raise RemotingError(f"{type(self).__name__} is closed", self._addr)

    def _new_consumer(self, address: str, handler: Callable[[Message], object],
                      max_buffered: int, on_discard: Callable[[Message], object] | None, *,
                      local: bool) -> Consumer:
        self._check_open()
        address = address_of(address)
        check_handler(handler, self._runner.blocking)
        consumer = Consumer(self._node, self._runner, address, handler,
                            max_buffered=max_buffered_of(max_buffered), local=local,
                            on_discard=check_callback(on_discard, self._runner.blocking),
                            consumer_id=0 if local else next(_consumer_ids),
                            credits=None if local else self)  # type: ignore[arg-type]
        if local:
            self._node.add_consumer(consumer, shared=False)
        else:
            self._hub.add(consumer, self)  # type: ignore[arg-type]
        return consumer

    def _registered(self, consumer: Consumer) -> None:
        with self._node.lock:
            self._remote.add(consumer)
            start, self._keeper_started = not self._keeper_started, True
        self._node.add_consumer(consumer, shared=False)
        if start:
            self._start_keeper()

    def _unhooked(self, consumer: Consumer) -> None:
        with self._node.lock:
            self._remote.discard(consumer)
        self._hub.remove(consumer)

    # ------------------------------------------------------------------ local routing

    def _send_locally(self, message: OutboundMessage) -> bool:
        """Hand a send to a local consumer; False if there is none.

        Raises:
            ReplyFailure: RECIPIENT_FAILURE, the consumer chosen is full.
        """
        node = self._node
        passed: set[object] = set()
        while (consumer := node.choose(message.address, here=True, skip=passed)) is not None:
            assert isinstance(consumer, Consumer)
            taken = node.send_to(consumer, "send", message.address, message.body,
                                 message.headers)
            if taken == "accepted":
                return True
            if taken == "full":
                raise self._counted(consumer_full(message.address))
            passed.add(consumer)
        return False

    def _request_locally(self, message: OutboundMessage, waiter: Waiter,
                         deadline: float | None) -> PendingReply[Waiter] | None:
        """Hand a request to a local consumer; return its reply entry, None if there is no
        local consumer.

        Raises:
            ReplyFailure: RECIPIENT_FAILURE, the consumer chosen is full.
        """
        node = self._node
        passed: set[object] = set()
        entry = None
        while (consumer := node.choose(message.address, here=True, skip=passed)) is not None:
            assert isinstance(consumer, Consumer)
            if entry is None:
                entry = node.expect_reply(waiter, deadline, message.address)
            taken = node.send_to(consumer, "request", message.address, message.body,
                                 message.headers, entry.reply_address)
            if taken == "accepted":
                return entry
            if taken == "full":
                with node.lock:
                    node.replies.remove(entry)
                raise self._counted(consumer_full(message.address))
            passed.add(consumer)
        if entry is not None:
            with node.lock:
                node.replies.remove(entry)
        return None

    def _publish_locally(self, message: OutboundMessage) -> None:
        node = self._node
        for consumer in node.every(message.address, here=True):
            assert isinstance(consumer, Consumer)
            node.send_to(consumer, "publish", message.address, message.body, message.headers)

    # ------------------------------------------------------------------ answers

    def _counted(self, failure: ReplyFailure) -> ReplyFailure:
        with self._node.lock:
            return self._node.count(failure)

    def _check(self, response: RemotingCommand, address: str | None) -> None:
        """Raise what a non-SUCCESS answer of the bus server means.

        Raises:
            ReplyFailure: a bus failure.
            RemotingError: the server serves no bus, or refused the request.
        """
        code = response.code
        if code == ResponseCode.SUCCESS:
            return
        if code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise RemotingError(f"{self._addr} serves no event bus: attach an EventBus to "
                                "that server (bus.attach(server))", self._addr)
        if code == ResponseCode.INVALID_PARAMETER:
            raise RemotingError(f"the bus server refused the request: {response.remark}",
                                self._addr)
        failure = failure_of(response, address)
        assert failure is not None
        raise self._counted(failure)

    def _reply_of(self, response: RemotingCommand, address: str | None) -> Message:
        """Return the reply a response carries.

        Raises:
            ReplyFailure, RemotingError: see `_check`.
        """
        self._check(response, address)
        sent_to, reply_address = reply_in(response)
        return Message(address=sent_to or address or "", body=response.body or b"",
                       headers=headers_in(response.ext_fields), kind="reply",
                       reply_address=reply_address,
                       replier=self)  # type: ignore[arg-type]

    def _timed_out(self, address: str | None, exc: RemotingTimeoutError) -> ReplyFailure:
        failure = self._counted(ReplyFailure("TIMEOUT", "the bus server did not answer in "
                                             "time", address=address))
        failure.__cause__ = exc
        return failure

    def _reply_command(self, message: OutboundMessage, failure: tuple[int, str] | None,
                       timeout: float | None) -> RemotingCommand:
        if failure is not None:
            return reply_command("fail", message.address, message.body, message.headers,
                                 timeout, failure[0], failure[1])
        return reply_command("request" if timeout is not None else "reply", message.address,
                             message.body, message.headers, timeout)


class _ConnectionWatch:
    """Tells a bus client that its connection to the bus server closed (a channel event
    listener of its transport client)."""

    def __init__(self, bus: _BusClient) -> None:
        self._bus = bus

    def on_channel_close(self, remote_addr: str, channel: object) -> None:
        if remote_addr == self._bus.addr:
            self._bus.connection_lost()

    def on_channel_connect(self, remote_addr: str, channel: object) -> None:
        pass

    def on_channel_exception(self, remote_addr: str, channel: object) -> None:
        pass

    def on_channel_idle(self, remote_addr: str, channel: object) -> None:
        pass


class BusClient(_BusClient):
    """A bus client over a blocking `RemotingClient` (plain methods, from any thread).

    ``BusClient(client, addr)`` uses the `EventBus` of the server at ``addr``. Handlers of
    its consumers run on threads of the bus client (``handler_threads``), one message at a
    time per consumer. `close` (or leaving a ``with`` block) unregisters its consumers and
    stops those threads; the `RemotingClient` is not closed.
    """

    __module__ = "remoting.bus"

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
            response = self._blocking.invoke_sync(
                self._addr, register_command(consumer.consumer_id, consumer.address,
                                             consumer.max_buffered), timeout_of(timeout))
            self._check(response, consumer.address)
        except BaseException:
            self._unhooked(consumer)
            raise
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
        """Keep the consumers registered at the bus server (the keeper thread): a heartbeat
        every `HEARTBEAT_SECONDS`, and after a lost connection, register them again, with a
        doubling pause between failed attempts, until the bus client closes."""
        wait, pause, failed = HEARTBEAT_SECONDS, FIRST_PAUSE, False
        while True:
            self._wake.wait(wait)
            self._wake.clear()
            if self._stopped.is_set() or not self._blocking.is_running:
                return
            lost, consumers = self._keeping()
            try:
                if lost:
                    for consumer in consumers:
                        self._check(self._blocking.invoke_sync(self._addr, register_command(
                            consumer.consumer_id, consumer.address, consumer.max_buffered),
                            DEFAULT_TIMEOUT), consumer.address)
                    if failed:
                        log.info("bus.registered_again", addr=self._addr,
                                 consumers=len(consumers))
                elif consumers:
                    self._blocking.invoke_oneway(self._addr, heartbeat_command(),
                                                 DEFAULT_TIMEOUT)
                wait, pause, failed = HEARTBEAT_SECONDS, FIRST_PAUSE, False
            except RemotingError as exc:
                if lost:  # the server cannot be reached yet: try again after a pause
                    self._register_failed(exc, len(consumers), not failed)
                    wait, pause, failed = pause, min(pause * 2, MAX_PAUSE), True

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

    # ------------------------------------------------------------------ messages

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
        with node.spans.sending(message):
            if self._send_locally(message):
                return
            self._call(send_command("send", message.address, message.body, message.headers,
                                    timeout), timeout, message.address)

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
        with node.spans.sending(message):
            self._publish_locally(message)
            self._call(send_command("publish", message.address, message.body,
                                    message.headers, None), timeout, message.address)

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
        with node.spans.sending(message):
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
        with self._node.spans.sending(message):
            self._blocking.invoke_async(self._addr, self._reply_command(message, failure, None),
                                        DEFAULT_TIMEOUT)

    def reply_and_request(self, reply_address: str, body: bytes, headers: dict[str, str],
                          timeout: float) -> Message:
        """Answer a message the server delivered, and wait for the answer to that."""
        message = self._node.outbound("reply", reply_address, body, headers)
        with self._node.spans.sending(message):
            response = self._call(self._reply_command(message, None, timeout), timeout, None,
                                  check=False)
            return self._reply_of(response, None)

    async def reply_and_request_async(self, reply_address: str, body: bytes,
                                      headers: dict[str, str], timeout: float) -> Message:
        raise RuntimeError("a BusClient's handlers run on threads: call "
                           "message.reply_and_request(...)")


class TrioBusClient(_BusClient):
    """A bus client over a running `TrioRemotingClient` (async methods, in its trio loop).

    ``TrioBusClient(client, addr)`` uses the `EventBus` of the server at ``addr``. Handlers
    of its consumers (plain or async functions) run as tasks of the client, one message at a
    time per consumer. ``aclose()`` (or leaving an ``async with`` block) unregisters its
    consumers; the client is not closed.
    """

    __module__ = "remoting.bus"

    def __init__(self, client: TrioRemotingClient, addr: str) -> None:
        if not isinstance(client, TrioRemotingClient):
            raise TypeError("TrioBusClient needs a TrioRemotingClient (a RemotingClient: use "
                            f"BusClient), got {type(client).__name__}")
        endpoint = client.endpoint
        self._runner = TaskRunner(lambda: endpoint.nursery, lambda: endpoint.loop_thread_id,
                                  endpoint.call_on_loop)
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

    def _spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        endpoint = self._trio.endpoint

        def start() -> None:
            try:
                endpoint.nursery.start_soon(fn, *args)
            except RuntimeError:  # the client stopped: the server forgets us with it
                pass

        if threading.get_ident() == endpoint.loop_thread_id:
            start()
        else:
            endpoint.call_on_loop(start)

    # ------------------------------------------------------------------ consumers

    async def consumer(self, address: str, handler: Callable[[Message], object], *,
                       max_buffered: int = DEFAULT_MAX_BUFFERED,
                       on_discard: Callable[[Message], object] | None = None,
                       timeout: float = DEFAULT_TIMEOUT) -> Consumer:
        """Register ``handler`` (a plain or an async function) at ``address`` on the bus
        server (see `BusClient.consumer`)."""
        consumer = self._new_consumer(address, handler, max_buffered, on_discard, local=False)
        try:
            response = await self._trio.invoke_sync(
                self._addr, register_command(consumer.consumer_id, consumer.address,
                                             consumer.max_buffered), timeout_of(timeout))
            self._check(response, consumer.address)
        except BaseException:
            self._unhooked(consumer)
            raise
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
        self._spawn(self._keep)

    def _wake_keeper(self) -> None:
        self._trio.endpoint.call_on_loop(lambda: self._wake.set())

    async def _keep(self) -> None:
        """`BusClient._keep` as a task of the client."""
        wait, pause, failed = HEARTBEAT_SECONDS, FIRST_PAUSE, False
        while True:
            with trio.move_on_after(wait):
                await self._wake.wait()
            self._wake = trio.Event()
            if self._closed:
                return
            lost, consumers = self._keeping()
            try:
                if lost:
                    for consumer in consumers:
                        self._check(await self._trio.invoke_sync(self._addr, register_command(
                            consumer.consumer_id, consumer.address, consumer.max_buffered),
                            DEFAULT_TIMEOUT), consumer.address)
                    if failed:
                        log.info("bus.registered_again", addr=self._addr,
                                 consumers=len(consumers))
                elif consumers:
                    await self._trio.invoke_oneway(self._addr, heartbeat_command(),
                                                   DEFAULT_TIMEOUT)
                wait, pause, failed = HEARTBEAT_SECONDS, FIRST_PAUSE, False
            except RemotingError as exc:
                if lost:
                    self._register_failed(exc, len(consumers), not failed)
                    wait, pause, failed = pause, min(pause * 2, MAX_PAUSE), True

    def _remote_removed(self, consumer: Consumer) -> None:
        self._unhooked(consumer)
        self._spawn(self._tell, unregister_command(consumer.consumer_id))

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

    # ------------------------------------------------------------------ messages

    async def send(self, address: str, body: bytes | None = None,
                   headers: dict[str, str] | None = None, *,
                   timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a message to one consumer of ``address`` (see `BusClient.send`)."""
        self._check_open()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound("send", address, body, headers)
        with node.spans.sending(message):
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
        with node.spans.sending(message):
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
        with node.spans.sending(message):
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
        with self._node.spans.sending(message):
            self._spawn(self._tell, self._reply_command(message, failure, None))

    def reply_and_request(self, reply_address: str, body: bytes, headers: dict[str, str],
                          timeout: float) -> Message:
        raise RuntimeError("a TrioBusClient's handlers are trio tasks: call "
                           "`await message.reply_and_request_async(...)`")

    async def reply_and_request_async(self, reply_address: str, body: bytes,
                                      headers: dict[str, str], timeout: float) -> Message:
        """Answer a message the server delivered, and wait for the answer to that."""
        message = self._node.outbound("reply", reply_address, body, headers)
        with self._node.spans.sending(message):
            response = await self._call(self._reply_command(message, None, timeout), timeout,
                                        None, check=False)
            return self._reply_of(response, None)

