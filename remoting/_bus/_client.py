"""What both bus clients share (`BusClientBase`), and the pieces a transport client gets for
them: its `ClientHub` (the DELIVER processor) and a `ConnectionWatch` per bus client.

A bus client talks to the `EventBus` of one server (``addr``) through the client's public
calls: its sends, publishes, requests and replies are calls of the bus's codes; its
consumers are registered there, and the server pushes their messages back over the client's
connection (DELIVER), which the client's `ClientHub` hands to them. Local consumers stay in
the bus client: only its own messages reach them, with no network in between. A keeper
(a thread, or a task: `Keeper` decides, the faces act) keeps the consumers registered.
"""

from __future__ import annotations

import itertools
import math
import threading
import weakref
from typing import TYPE_CHECKING, Final

from codec import ResponseCode
from processors import AsyncRequestProcessor

from .._errors import RemotingError, RemotingTimeoutError
from .._log import FirstOfEach, log
from ._consumer import Consumer, check_callback, check_handler
from ._failure import ReplyFailure
from ._interceptors import add_interceptor
from ._message import Message
from ._node import BusNode, consumer_full
from ._telemetry import NO_TELEMETRY, telemetry_for
from ._wire import (
    HEARTBEAT_SECONDS,
    TRANSPORT_MARGIN,
    BadBusRequest,
    BusCode,
    address_of,
    bad_request_response,
    deliver_of,
    failure_of,
    failure_response,
    headers_in,
    max_buffered_of,
    not_registered_response,
    ok_response,
    register_command,
    reply_command,
    reply_in,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import RemotingCommand
    from processors import RequestContext

    from .._faces._blocking import RemotingClient
    from .._faces._trio import TrioRemotingClient
    from ._interceptors import BusInterceptor
    from ._message import OutboundMessage, Replier
    from ._reply_table import PendingReply
    from ._runners import Runner
    from ._statistics import BusStatistics
    from ._waiter import Waiter

__all__ = ["FIRST_PAUSE", "MAX_PAUSE", "BusClientBase", "ClientHub", "ConnectionWatch",
           "Keeper", "transport_timeout"]

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
        self._refusals = FirstOfEach()  # bad pushes logged, per server and reason

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
            if self._refusals.first(ctx.remote_addr, exc.field or str(exc)):
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


class Keeper:
    """When a bus client's keeper acts (sans-I/O): it waits `wait` seconds, or until woken,
    then registers the consumers again if the connection was lost, else sends a heartbeat,
    and reports how that went. After a failed registration it tries again after a pause that
    doubles from `FIRST_PAUSE` up to `MAX_PAUSE`; after a success, it beats every
    `HEARTBEAT_SECONDS`."""

    __slots__ = ("_failing", "_pause", "wait")

    def __init__(self) -> None:
        self.wait = HEARTBEAT_SECONDS
        self._pause = FIRST_PAUSE
        self._failing = False  # registering again has failed since the last success

    def succeeded(self, registered: bool) -> bool:
        """The step worked; True if it registered the consumers again after failures."""
        back = registered and self._failing
        self.wait, self._pause, self._failing = HEARTBEAT_SECONDS, FIRST_PAUSE, False
        return back

    def failed(self, registering: bool) -> bool:
        """The step failed; True if it is the first failure to register again (a failed
        heartbeat only waits for the next: the connection's close will tell)."""
        if not registering:
            self.wait = HEARTBEAT_SECONDS
            return False
        first = not self._failing
        self.wait, self._pause, self._failing = (
            self._pause, min(self._pause * 2, MAX_PAUSE), True)
        return first


class BusClientBase:
    """What both bus clients share: the node, the hub, local routing, reading answers."""

    _runner: Runner

    def __init__(self, client: RemotingClient | TrioRemotingClient, addr: str) -> None:
        if not isinstance(addr, str) or ":" not in addr:
            raise TypeError(f"addr must be a 'host:port' str, got {addr!r}")
        self._client = client
        self._addr = addr
        self._node = BusNode(NO_TELEMETRY, reply_prefix="local.")
        self._node.telemetry = telemetry_for(client.config, self._node, "client")
        self._node.on_remote_removed = self._remote_removed
        self._hub = ClientHub.of(client)
        self._remote: set[Consumer] = set()
        self._closed = False
        self._lost = False  # the server forgot the consumers: register them again
        self._keeper_started = False
        client.register_channel_event_listener(ConnectionWatch(self))

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

    def _kept(self, keeper: Keeper, lost: bool, consumers: list[Consumer],
              failure: RemotingError | None) -> None:
        """Act on how the keeper's step went: log, and try again after a pause."""
        if failure is None:
            if keeper.succeeded(lost):
                log.info("bus.registered_again", addr=self._addr, consumers=len(consumers))
            return
        if lost:
            with self._node.lock:
                self._lost = True
        if keeper.failed(lost):
            log.warning("bus.registration_lost", addr=self._addr, consumers=len(consumers),
                        error=type(failure).__name__)

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

    def _registration(self, consumer: Consumer) -> RemotingCommand:
        """Return the REGISTER of ``consumer`` (its window as it is now, what it holds)."""
        with self._node.lock:
            held = consumer.registering()
            return register_command(consumer.consumer_id, consumer.address,
                                    consumer.max_buffered, held)

    def _owed_after_registration(self, consumer: Consumer) -> int:
        """The server has ``consumer`` again: return the credits to send it now."""
        with self._node.lock:
            return consumer.registered_again()

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


class ConnectionWatch:
    """Tells a bus client that its connection to the bus server closed (a channel event
    listener of its transport client)."""

    def __init__(self, bus: BusClientBase) -> None:
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
