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
from typing import TYPE_CHECKING, Final, Literal

from codec import ResponseCode
from processors import AsyncRequestProcessor

from .._errors import RemotingError, RemotingTimeoutError
from .._log import FirstOfEach, log
from .._steps import Call, Oneway
from ._consumer import Consumer, check_callback, check_handler
from ._failure import BusPermissionError, ReplyFailure
from ._interceptors import add_interceptor
from ._message import Message
from ._node import BusNode, consumer_full, deadline_after
from ._telemetry import NO_TELEMETRY, telemetry_for
from ._waiter import RUNG
from ._wire import (
    DEFAULT_TIMEOUT,
    HEARTBEAT_SECONDS,
    TRANSPORT_MARGIN,
    BadBusRequest,
    BusCode,
    address_of,
    bad_request_response,
    credit_command,
    deliver_many_of,
    deliver_of,
    failure_of,
    failure_response,
    headers_in,
    heartbeat_command,
    max_buffered_bytes_of,
    max_buffered_of,
    not_registered_response,
    ok_response,
    register_command,
    reply_command,
    reply_in,
    send_command,
    taken_response,
    timeout_of,
    unregister_command,
    window_command,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import RemotingCommand
    from processors import RequestContext

    from .._faces._blocking import RemotingClient
    from .._faces._trio import TrioRemotingClient
    from .._steps import Steps
    from ._interceptors import BusInterceptor
    from ._message import OutboundMessage, Replier
    from ._reply_table import PendingReply
    from ._runners import Runner
    from ._statistics import BusStatistics
    from ._waiter import TaskWaiter, ThreadWaiter, Waiter

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
        """Return ``client``'s hub, registering it for DELIVER and DELIVER_MANY on first
        use."""
        with _hubs_lock:
            hub = _hubs.get(client)
            if hub is None:
                hub = _hubs[client] = cls()
                client.register_processor(BusCode.DELIVER, hub)
                client.register_processor(BusCode.DELIVER_MANY, hub)
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
            pushes = (deliver_many_of(request) if request.code == BusCode.DELIVER_MANY
                      else [deliver_of(request)])
        except BadBusRequest as exc:
            if self._refusals.first(ctx.remote_addr, exc.field or str(exc)):
                log.warning("bus.request_refused", code=request.code, peer=ctx.remote_addr,
                            reason=str(exc))
            return bad_request_response(exc)
        with self._lock:
            found = self._consumers.get(pushes[0].consumer_id)
        if found is None:
            return not_registered_response()
        consumer, replier = found
        taken = [consumer.offer(Message(address=push.address, body=push.body,
                                        headers=push.headers, kind=push.kind,
                                        reply_address=push.reply_address, replier=replier))
                 for push in pushes]
        if request.code == BusCode.DELIVER_MANY:  # "a", "f" or "g" a message, in order
            return taken_response("".join([outcome[0] for outcome in taken]))
        if taken[0] == "accepted":
            return ok_response()
        if taken[0] == "gone":
            return not_registered_response()
        return failure_response(consumer_full(pushes[0].address))


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
    """What both bus clients share: everything but where they wait.

    Each public call is written once here, as steps (remoting/_steps.py): `BusClient` drives
    them in the calling thread, `TrioBusClient` in the calling task. A face gives its
    ``runner`` (where handlers run) and ``waiter`` class (what its steps wait with), how it
    starts the keeper (`_start_keeper`) and how it sends a request without waiting for it
    (`_tell`, or `_tell_oneway` when no answer is wanted at all).
    """

    # what a face says when a handler calls the other face's reply_and_request
    _wrong_face = "use the reply_and_request of this bus client's face"

    def __init__(self, client: RemotingClient | TrioRemotingClient, addr: str,
                 runner: Runner, waiter: type[ThreadWaiter] | type[TaskWaiter]) -> None:
        if not isinstance(addr, str) or ":" not in addr:
            raise TypeError(f"addr must be a 'host:port' str, got {addr!r}")
        self._client = client
        self._addr = addr
        self._runner = runner
        self._waiter = waiter
        self._node = BusNode(NO_TELEMETRY, reply_prefix="local.")
        self._node.telemetry = telemetry_for(client.config, self._node, "client")
        self._node.on_remote_removed = self._remote_removed
        self._hub = ClientHub.of(client)
        self._remote: set[Consumer] = set()
        self._closed = False
        self._lost = False  # the server forgot the consumers: register them again
        self._keeper_started = False
        self._alarm: Waiter | None = None  # what the keeper sleeps on, while it sleeps
        self._rung = False  # the keeper was woken while awake: it does not sleep next time
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

    def _start_keeper(self) -> None:
        raise NotImplementedError

    def _tell(self, command: RemotingCommand, then: Callable[[], object] | None = None
              ) -> None:
        """Send ``command`` to the bus server in the background (its answer does not
        matter: a lost connection made the server forget what it was about); ``then()``
        runs once it ended, whichever way."""
        raise NotImplementedError

    def _tell_oneway(self, command: RemotingCommand) -> None:
        """Send ``command`` to the bus server oneway (no answer comes back; a lost connection
        made the server forget what it was about), never waiting for the server."""
        raise NotImplementedError

    def _closing(self) -> None:
        """Mark the bus client closed and unregister its consumers (the server is told in
        the background)."""
        with self._node.lock:
            self._closed = True
            consumers = [*self._node.local.handlers(), *self._remote]
        self._ring()
        for consumer in consumers:
            consumer.unregister()

    # ------------------------------------------------------------------ keeping registered

    def connection_lost(self) -> None:
        """The connection to the bus server closed, and the server forgot this client's
        consumers with it: have the keeper register them again. Called on the client's
        event thread."""
        with self._node.lock:
            if self._closed or not self._remote:
                return
            self._lost = True
        self._ring()

    def _ring(self) -> None:
        """Wake the keeper at once (any thread)."""
        with self._node.lock:
            self._rung = True
            alarm, self._alarm = self._alarm, None
            if alarm is not None:
                alarm.complete(RUNG)

    def _nap(self, seconds: float) -> Steps[None]:
        """Sleep ``seconds``, or until `_ring` (the keeper's steps)."""
        waiter = self._waiter()
        with self._node.lock:
            if self._rung:  # rung while awake: not a moment's sleep
                self._rung = False
                return
            self._alarm = waiter
        yield waiter.until(deadline_after(seconds))
        with self._node.lock:
            if self._alarm is waiter:  # its time passed
                self._alarm = None
            else:  # rung: that ring was for this nap
                self._rung = False

    def _serving(self) -> bool:
        """False once the transport client stopped (the keeper then ends)."""
        return True

    def _keep(self) -> Steps[None]:
        """Keep the consumers registered at the bus server (the keeper's steps; `Keeper`
        says when), until the bus client closes or its transport client stops."""
        keeper = Keeper()
        while True:
            yield from self._nap(keeper.wait)
            if self._closed or not self._serving():
                return
            lost, consumers = self._keeping()
            failure = None
            try:
                if lost:
                    for consumer in consumers:
                        response = yield Call(self._client, self._addr,
                                              self._registration(consumer), DEFAULT_TIMEOUT)
                        self._check(response, consumer.address)
                        owed = self._owed_after_registration(consumer)
                        if owed:
                            yield from self.credit(consumer, owed)
                elif consumers:
                    yield Oneway(self._client, self._addr, heartbeat_command(), DEFAULT_TIMEOUT)
            except RemotingError as exc:  # the server cannot be reached yet
                failure = exc
            self._kept(keeper, lost, consumers, failure)

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

    # ------------------------------------------------------------------ consumers

    def _check_open(self) -> None:
        """Raises:
            RemotingError: the bus client is closed.
        """
        if self._closed:
            raise RemotingError(f"{type(self).__name__} is closed", self._addr)

    def _new_consumer(self, address: str, handler: Callable[[Message], object],
                      max_buffered: int, max_buffered_bytes: int,
                      on_discard: Callable[[Message], object] | None, *, local: bool
                      ) -> Consumer:
        self._check_open()
        address = address_of(address)
        check_handler(handler, self._runner.blocking)
        consumer = Consumer(self._node, self._runner, address, handler,
                            max_buffered=max_buffered_of(max_buffered),
                            max_buffered_bytes=max_buffered_bytes_of(max_buffered_bytes),
                            local=local,
                            on_discard=check_callback(on_discard, self._runner.blocking),
                            consumer_id=0 if local else next(_consumer_ids),
                            credits=None if local else self)
        if local:
            self._node.add_consumer(consumer, shared=False)
        else:
            self._hub.add(consumer, self)
        return consumer

    def _register(self, address: str, handler: Callable[[Message], object],
                  max_buffered: int, max_buffered_bytes: int,
                  on_discard: Callable[[Message], object] | None, timeout: float
                  ) -> Steps[Consumer]:
        """Register a consumer at the bus server; return it once registered (steps)."""
        consumer = self._new_consumer(address, handler, max_buffered, max_buffered_bytes,
                                      on_discard, local=False)
        try:
            response = yield Call(self._client, self._addr, self._registration(consumer),
                                  timeout_of(timeout))
            self._check(response, consumer.address)
        except BaseException:
            self._unhooked(consumer)
            raise
        self._owed_after_registration(consumer)  # none: it held nothing yet
        self._registered(consumer)
        return consumer

    def _registration(self, consumer: Consumer) -> RemotingCommand:
        """Return the REGISTER of ``consumer`` (its window as it is now, what it holds)."""
        with self._node.lock:
            held = consumer.registering()
            return register_command(consumer.consumer_id, consumer.address,
                                    consumer.max_buffered, held, many=True)

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

    def _remote_removed(self, consumer: Consumer) -> None:
        """A remote consumer was unregistered: tell the server, in the background."""
        self._unhooked(consumer)
        self._tell(unregister_command(consumer.consumer_id))

    def credit(self, consumer: Consumer, credits: int) -> Steps[None]:
        """`Credits`: tell the server ``consumer`` finished ``credits`` messages (steps)."""
        try:
            yield Oneway(self._client, self._addr, credit_command(consumer.consumer_id, credits),
                         DEFAULT_TIMEOUT)
        except RemotingError:  # the connection is gone, and the registration with it
            pass

    def resize(self, consumer: Consumer, window: int, credits: int,
               applied: Callable[[], object]) -> None:
        """`Credits`: tell the server ``consumer``'s new window, in the background."""
        self._tell(window_command(consumer.consumer_id, window, credits), applied)

    # ------------------------------------------------------------------ messages

    def _send(self, kind: Literal["send", "publish"], address: str, body: object,
              headers: object, timeout: float) -> Steps[None]:
        self._check_open()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound(kind, address, body, headers)
        with node.telemetry.sending(message):
            if kind == "publish":  # the local consumers, and the server's
                self._publish_locally(message)
            elif self._send_locally(message):
                return
            command = send_command(kind, message.address, message.body, message.headers,
                                   timeout if kind == "send" else None)
            yield from self._call(command, timeout, message.address)

    def _request(self, address: str, body: object, headers: object, timeout: float
                 ) -> Steps[Message]:
        self._check_open()
        waiter = self._waiter()
        timeout = timeout_of(timeout)
        node = self._node
        message = node.outbound("request", address, body, headers)
        with node.telemetry.sending(message):
            entry = self._request_locally(message, waiter, deadline_after(timeout))
            if entry is not None:
                return (yield from node.wait_reply(waiter, entry))
            response = yield from self._call(send_command("request", message.address,
                                                          message.body, message.headers,
                                                          timeout),
                                             timeout, message.address, check=False)
            return self._reply_of(response, message.address)

    def _call(self, command: RemotingCommand, timeout: float, address: str | None, *,
              check: bool = True) -> Steps[RemotingCommand]:
        """Call the bus server with ``command`` (steps); return its answer.

        Raises:
            ReplyFailure: TIMEOUT (no answer in time), or what the answer says (``check``).
            RemotingError: as `_check`, and the transport's.
        """
        try:
            response: RemotingCommand = yield Call(self._client, self._addr, command,
                                                   transport_timeout(timeout))
        except RemotingTimeoutError as exc:
            raise self._timed_out(address, exc) from exc
        if check:
            self._check(response, address)
        return response

    # ------------------------------------------------------------------ Replier

    def send_reply(self, reply_address: str, body: bytes, headers: dict[str, str],
                   failure: tuple[int, str] | None) -> None:
        """Answer a message the server delivered (never waits: sent oneway, in the
        background: the server's verdict on it would change nothing here, so it sends none)."""
        message = self._node.outbound("fail" if failure else "reply", reply_address, body,
                                      headers)
        with self._node.telemetry.sending(message):
            self._tell_oneway(self._reply_command(message, failure, None))

    def replying(self, reply_address: str, body: bytes, headers: dict[str, str],
                 timeout: float, *, blocking: bool) -> Steps[Message]:
        """Answer a message the server delivered, and wait for the answer to that (steps).

        Raises:
            RuntimeError: driven by the other face (a thread in a trio bus client's
                handler, or the reverse).
        """
        if blocking != self._runner.blocking:
            raise RuntimeError(self._wrong_face)
        message = self._node.outbound("reply", reply_address, body, headers)
        with self._node.telemetry.sending(message):
            response = yield from self._call(self._reply_command(message, None, timeout),
                                             timeout, None, check=False)
            return self._reply_of(response, None)

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
            BusPermissionError: the access key may not do that (NO_PERMISSION).
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
        if code == ResponseCode.NO_PERMISSION:  # the bus's permissions, or the ACL's
            raise BusPermissionError(response.remark or "no permission", self._addr,
                                     address=address)
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
                       reply_address=reply_address, replier=self)

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
