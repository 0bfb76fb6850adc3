"""A subscription, written once for both faces as steps (remoting/_steps.py): receiving its
deliveries, acknowledging them in groups, moving to another server, and closing.

A subscription is a transport stream opened with ``credits`` and no automatic grants: the
service gives credits back as deliveries are finished, requeued or time out, so a subscriber
holds at most ``credits`` unacknowledged messages (NSQ's RDY). Its acknowledgements are kept
by a `SubscriptionAcks` (grouping, counts, answers); a group is sent when it is due, checked
at each acknowledgement and while waiting for the next message. Closing sends the last group
with an answer, which comes once every ACK before it was applied.

A subscription made with ``addr=None`` moves along the client's address list when its stream
ends with GO_AWAY or a lost connection: it opens a new stream and starts new
`SubscriptionAcks` (what was read from the old server and not taken goes back to that
server's channel).

The faces (`BlockingSubscription`, `TrioSubscription`) only drive these steps; where they
differ is `remoting.queue._stream_steps` and `_clock` (the face's clock). Deliveries may be
acknowledged from any thread of a blocking face, so the state they share is changed under
``_lock`` (never held across a step).
"""

from __future__ import annotations

import threading
from collections import deque
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, Generic, Self, TypeVar

import trio

from codec import ResponseCode

from .._checks import blocking_call
from .._errors import RemotingError, RemotingStreamError
from .._log import log
from .._steps import drive, drive_async
from ._acknowledgements import SubscriptionAcks, deliveries_of
from ._messages import Message
from ._requests import delay_ms, subscribe_request
from ._sansio._acks import AckOp
from ._stream_steps import TIMED_OUT, Answer, Ask, CloseStream, OpenStream, Receive, SendAck

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from .._faces._blocking import RemotingClient
    from .._faces._trio import TrioRemotingClient
    from .._steps import Steps
    from ._sansio._records import Fields
    from ._stream_steps import Opened

__all__ = ["BlockingSubscription", "Delivered", "Delivery", "Subscription", "TrioDelivery",
           "TrioSubscription"]

# What a blocking call of the queue's faces names as the way to do it in trio code.
TRIO_QUEUE: Final = ("QueueClient(client) over a TrioRemotingClient (remoting.open_client()), "
                      "whose methods are awaited")

_Sub = TypeVar("_Sub", bound="Subscription[Any]")
_Delivery = TypeVar("_Delivery", bound="Delivered[Any]")


class Delivered(Message, Generic[_Sub]):
    """A delivered message, as both faces hold it: its fields, its subscription, and the
    acknowledgements of the stream it came on."""

    __slots__ = ("_acks", "_done", "_sub")

    def __init__(self, topic: str, fields: Fields, attempts: int, sub: _Sub,
                 acks: SubscriptionAcks) -> None:
        self.topic = topic  # the fields set here, not through Message: a call less per message
        self.offset = fields[0]
        self.timestamp = fields[1] / 1000
        self.headers = fields[3]
        self.body = fields[4]
        self.attempts = attempts
        self._sub: _Sub = sub
        self._acks = acks
        self._done = False


def _may_move(addr: str | None, ended: RemotingStreamError, acks: SubscriptionAcks) -> bool:
    """True if a subscription whose stream ended with ``ended`` subscribes again: one made
    with the address list (``addr`` None), still open, whose server drained (GO_AWAY) or
    whose connection was lost."""
    return (addr is None and not acks.closed
            and (ended.code is None or ended.code == ResponseCode.GO_AWAY))


class Subscription(Generic[_Delivery]):
    """What both faces' subscriptions are: the stream deliveries come on, their
    acknowledgements, the deliveries received and not yet read, the counters, and every
    call as steps."""

    _delivery: type[_Delivery]  # the face's delivery class

    def __init__(self, client: RemotingClient | TrioRemotingClient, opened: Opened,
                 topic: str, channel: str, credits: int, ack_window: float, timeout: float,
                 addr: str | None = None) -> None:
        stream = opened.stream
        self._client = client
        self._caller = client.endpoint.caller
        self._opened = opened
        self._stream = stream  # the transport's stream deliveries come on
        self._addr = addr  # as subscribed: None moves along the address list
        self._timeout = timeout
        self._acks = SubscriptionAcks(stream.addr, topic, channel, stream.stream_id, credits,
                                      ack_window)
        self._ready: deque[_Delivery] = deque()
        self._ended = False
        self._lock = threading.Lock()
        self._now = self._clock()
        self.topic = topic
        self.channel = channel
        self.received = 0
        self.moves = 0

    @staticmethod
    def _clock() -> Callable[[], float]:
        """Return the face's clock (what `Receive`'s deadlines are on)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.topic}/{self.channel} from {self._stream.addr}>"

    @property
    def acked(self) -> int:
        return self._acks.acked

    @property
    def requeued(self) -> int:
        return self._acks.requeued

    @property
    def touched(self) -> int:
        return self._acks.touched

    @property
    def refused(self) -> int:
        return self._acks.refused

    # ------------------------------------------------------------------ receiving

    def _receive(self, timeout: float | None) -> Steps[_Delivery | None]:
        """The next delivery, waiting up to ``timeout`` seconds (None: for ever); None once
        the subscription has ended. Sends the acknowledgements that come due meanwhile;
        moves to another server when it may (``addr=None``).

        Raises:
            TimeoutError: nothing within ``timeout``.
            remoting.RemotingStreamError: the stream failed and the subscription could not
                (or may not) move.
        """
        now = self._now
        until = None if timeout is None else now() + timeout
        while not self._ready:
            if self._ended:
                return None
            acks = self._acks
            if acks.group.due(now()):
                yield from self._flush()
            marks = [m for m in (acks.group.deadline, until) if m is not None]
            try:
                item = yield Receive(self._stream, min(marks) if marks else None)
            except RemotingStreamError as exc:
                if not _may_move(self._addr, exc, acks):
                    raise
                yield from self._move(exc)
                continue
            if item is TIMED_OUT:
                if until is not None and now() >= until:
                    raise TimeoutError(f"no message within {timeout}s")
                continue
            if item is None:
                self._ended = True
                return None
            batch = deliveries_of(item, acks)
            self._ready.extend(self._delivery(self.topic, fields, attempts, self, acks)
                               for fields, attempts in batch)
            self.received += len(batch)
        return self._ready.popleft()

    def _move(self, ended: RemotingStreamError) -> Steps[None]:
        """Subscribe again through the address list, in place of the stream that ended: the
        acknowledgements go on there, and what was read but not taken is the old server's
        (back to its channel, no longer acknowledgeable).

        Raises:
            remoting.RemotingStreamError: ``ended``, if subscribing again failed (its
                cause says why).
        """
        try:
            opened = yield OpenStream(self._client, None,
                                      subscribe_request(self.topic, self.channel),
                                      self._acks.credits, self._timeout)
        except RemotingError as exc:
            raise ended from exc
        old = self._opened
        stream = opened.stream
        with self._lock:
            self._opened, self._stream = opened, stream
            self._acks = self._acks.moved_to(stream.stream_id)
            self._ready.clear()
            self.moves += 1
        log.info("queue.resubscribed", topic=self.topic, channel=self.channel,
                 reason="GO_AWAY" if ended.code == ResponseCode.GO_AWAY else "connection lost")
        yield CloseStream(old)  # it has ended: this only lets go of it

    # ------------------------------------------------------------------ acknowledging

    def _settled(self, delivery: _Delivery, op: AckOp, delay_ms: int) -> bool:
        """Record ``op`` for ``delivery``; True when the acknowledgements are due to be sent
        (`_flush`). A delivery from a server the subscription has left is only counted
        (refused).

        Raises:
            QueueError: it was finished or requeued already, or the subscription is closed.
        """
        with self._lock:
            acks = self._acks
            done = delivery._done
            if delivery._acks is not acks:
                acks.stale(delivery, done)
                due = False
            elif self._stream.ended and not acks.closed:
                # its stream is over (the server drained, or the connection was lost): the
                # service gave its deliveries back to the channel, nothing can apply this one
                acks.check(delivery, done)
                acks.made(op)
                acks.unsent(1, "made after the subscription's stream had ended")
                due = False
            else:
                due = acks.add(delivery, done, op, delay_ms, self._now())
            if op is not AckOp.TOUCH:
                delivery._done = True
            return due

    def _flush(self) -> Steps[None]:
        """Send the acknowledgements pending now (`SendAck`)."""
        with self._lock:
            acks = self._acks
            acks.collect()
            made = acks.request()
            conn = self._stream._conn
        if made is None:
            return
        request, count = made
        if conn is None or conn.closed:
            acks.unsent(count, "the subscription's connection is gone")
            return
        try:
            fut = yield SendAck(self._caller, conn, request, self._timeout)
        except RemotingError as exc:  # the connection is gone: the stream ends with it
            acks.failed(count, exc, "could not be sent")
            return
        if fut is not None:
            with self._lock:
                acks.sent.append((fut, count))

    # ------------------------------------------------------------------ closing

    def _close(self) -> Steps[None]:
        """Send the last acknowledgements and wait for their answer (up to the
        subscription's timeout), then end the stream: the deliveries not finished go back
        to the channel. Idempotent."""
        acks = self._acks
        if acks.closed:
            return
        try:
            with self._lock:
                acks.collect()
                made = acks.request(even_empty=True)  # its answer comes after all before it
                conn = self._stream._conn
            assert made is not None
            request, count = made
            if conn is None or conn.closed:
                acks.unsent(count, "the subscription's connection is gone")
            else:
                try:
                    fut = yield Ask(self._caller, conn, request, self._timeout)
                except RemotingError as exc:
                    acks.failed(count, exc, "could not be sent")
                else:
                    with self._lock:
                        acks.sent.append((fut, count))
                    yield Answer(fut, self._timeout)
            with self._lock:
                acks.collect()
        finally:
            with self._lock:
                acks.closed = True
            unread = yield CloseStream(self._opened)
            for item in unread:
                deliveries_of(item, acks)  # count the notices; the deliveries go back


# ---------------------------------------------------------------------- the blocking face

class Delivery(Delivered["BlockingSubscription"]):
    """A message delivered by a blocking subscription: finish it with `ack`, give it back
    with `requeue`, or ask for more time with `touch`."""

    __slots__ = ()

    def ack(self) -> None:
        """Finish the message (NSQ's FIN); it is not delivered again.

        Raises:
            QueueError: it was acknowledged or requeued already, or the subscription is
                closed (the message went back to the channel).
        """
        if self._sub._settled(self, AckOp.FINISH, 0):
            drive(self._sub._flush())

    def requeue(self, delay: float = 0.0) -> None:
        """Give the message back, to be delivered again after ``delay`` seconds (NSQ's REQ).

        Raises:
            QueueError: as `ack`.
            TypeError, ValueError: ``delay`` is not seconds >= 0.
        """
        if self._sub._settled(self, AckOp.REQUEUE, delay_ms(delay)):
            drive(self._sub._flush())

    def touch(self) -> None:
        """Reset the message's timeout: ``msg_timeout`` more seconds from now (NSQ's TOUCH).

        Raises:
            QueueError: as `ack`.
        """
        if self._sub._settled(self, AckOp.TOUCH, 0):
            drive(self._sub._flush())


class BlockingSubscription(Subscription[Delivery]):
    """A blocking subscription: ``for msg in sub``; a context manager that closes it. Read it
    from one thread at a time; its deliveries may be acknowledged from any thread.

    Subscribed with ``addr=None`` (the client's address list), it moves to the next address
    when its server drains (GO_AWAY) or its connection is lost, and goes on: see `receive`.

    Attributes:
        received: deliveries received.
        acked, requeued, touched: acknowledgements made.
        refused: acknowledgements the service refused (the delivery had timed out), and
            those of deliveries from a server the subscription has left.
        moves: how many times it moved to another server.
    """

    _delivery = Delivery

    @staticmethod
    def _clock() -> Callable[[], float]:
        return monotonic

    @blocking_call("BlockingSubscription.receive", TRIO_QUEUE)
    def receive(self, timeout: float | None = None) -> Delivery | None:
        """Return the next delivery, waiting up to ``timeout`` seconds (None: for ever);
        None once the subscription has ended.

        Subscribed to an address (``addr`` given), the subscription ends with the stream's
        error when its server drains (``code`` GO_AWAY) or its connection is lost: subscribe
        again. Subscribed with ``addr=None``, it subscribes again at once, through the
        client's address list (the next address, for a draining server), and goes on; the
        deliveries it held from the old server go back to that server's channel (their
        acknowledgements count in ``refused``), and it raises only if that fails.

        Raises:
            TimeoutError: nothing within ``timeout``; the subscription goes on.
            remoting.RemotingStreamError: its connection was lost, or the server drained
                (``code`` GO_AWAY), and it could not (or may not) subscribe again.
        """
        ready = self._ready
        return ready.popleft() if ready else drive(self._receive(timeout))

    def __iter__(self) -> Self:
        return self

    @blocking_call("BlockingSubscription.__next__ (for msg in sub)", TRIO_QUEUE)
    def __next__(self) -> Delivery:
        delivery = self.receive()
        if delivery is None:
            raise StopIteration
        return delivery

    def flush(self) -> None:
        """Send the acknowledgements pending now (from any thread)."""
        drive(self._flush())

    @blocking_call("BlockingSubscription.close", TRIO_QUEUE)
    def close(self) -> None:
        """Send the pending acknowledgements, wait for their answers, and end the
        subscription: the deliveries not finished go back to the channel (idempotent)."""
        drive(self._close())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


# ---------------------------------------------------------------------- the trio face

class TrioDelivery(Delivered["TrioSubscription"]):
    """A message delivered by a trio subscription: ``await msg.ack()`` (see `Delivery`)."""

    __slots__ = ()

    async def ack(self) -> None:
        """Finish the message (see `Delivery.ack`)."""
        if self._sub._settled(self, AckOp.FINISH, 0):
            await drive_async(self._sub._flush())

    async def requeue(self, delay: float = 0.0) -> None:
        """Give the message back (see `Delivery.requeue`)."""
        if self._sub._settled(self, AckOp.REQUEUE, delay_ms(delay)):
            await drive_async(self._sub._flush())

    async def touch(self) -> None:
        """Reset the message's timeout (see `Delivery.touch`)."""
        if self._sub._settled(self, AckOp.TOUCH, 0):
            await drive_async(self._sub._flush())


class TrioSubscription(Subscription[TrioDelivery]):
    """A trio subscription: ``async for msg in sub`` (see `BlockingSubscription`); an async
    context manager that closes it."""

    _delivery = TrioDelivery

    @staticmethod
    def _clock() -> Callable[[], float]:
        return trio.lowlevel.current_clock().current_time  # bound once: read per message

    async def receive(self) -> TrioDelivery | None:
        """Return the next delivery, waiting for it; None once the subscription ended.

        Raises:
            remoting.RemotingStreamError: as `BlockingSubscription.receive` (with
                ``addr=None`` it subscribes again through the address list first).
        """
        ready = self._ready
        return ready.popleft() if ready else await drive_async(self._receive(None))

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> TrioDelivery:
        delivery = await self.receive()
        if delivery is None:
            raise StopAsyncIteration
        return delivery

    async def flush(self) -> None:
        """Send the acknowledgements pending now."""
        await drive_async(self._flush())

    async def aclose(self) -> None:
        """End the subscription (see `BlockingSubscription.close`)."""
        await drive_async(self._close())

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()
