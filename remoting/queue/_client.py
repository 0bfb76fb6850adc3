"""`QueueClient`: the queue service's calls over a remoting client, for each face.

``QueueClient(client)`` is a `BlockingQueueClient` for a `RemotingClient` (plain methods,
``for msg in sub``) and a `TrioQueueClient` for a `TrioRemotingClient` (the same names,
awaited; ``async for msg in sub``). Requests are built by the module's functions, shared by
both; a reply other than SUCCESS raises `QueueError` (`QueueFullError` for a full topic).

A subscription is a transport stream opened with ``credits`` and no automatic grants: the
service gives credits back as deliveries are finished, requeued or time out, so a subscriber
holds at most ``credits`` unacknowledged messages (NSQ's RDY). Acknowledgements wait in an
`AckGroup` and travel together (one ACK request per group): once half the credits are
pending, once the oldest has waited ``ack_window`` seconds (checked at each acknowledgement
and while waiting for the next message), at once for a requeue or a touch, and when the
subscription closes. The service says which acknowledgements it refused (a delivery that
timed out meanwhile and went to another subscriber): in each ACK's answer for the blocking
face (an ACK request from a thread costs that thread no wait), in a notice on the stream for
the trio face, whose ACKs are oneway (one frame less per group: the loop sends them at once);
they are counted in ``refused`` and logged as ``queue.ack_refused``. So are those that cannot
be applied, whose messages will be delivered again: made once the subscription's stream has
ended (its server drained, or it was closed), that found its connection gone, or whose ACK
failed or was answered with anything but SUCCESS. Closing a subscription sends its last ACK
with an answer, which comes once every ACK before it was applied.

A subscription made with ``addr=None`` moves along the client's address list when its stream
ends with GO_AWAY or a lost connection: it opens a new stream, and its acknowledgements start
a new `_Acks` (a delivery remembers the one of its stream, so an acknowledgement of the old
server's delivery is counted as refused, never sent to the new server).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, Generic, Self, TypeVar, overload

import orjson
import trio

from codec import FLAG_ONEWAY, RemotingCommand, ResponseCode

from .._checks import blocking_call, seconds
from .._errors import RemotingError, RemotingStreamError
from .._faces._blocking import RemotingClient
from .._faces._streams import open_trio_stream
from .._faces._trio import TrioRemotingClient
from .._log import log
from .._messaging._acks import MAX_DELAY_MS, AckGroup, AckOp, pack_acks
from .._messaging._codes import STREAM_ID, QueueCode
from .._messaging._credits import credits_of
from .._messaging._records import (
    MAX_PUBLISH_HEADERS,
    encode_content,
    pack_entries,
    record_fields,
)
from ._errors import QueueError, refusal_error
from ._messages import Message, messages_of
from ._stats import MAX_TOPICS_PER_PAGE, QueueStatistics, TopicOffsets, statistics_from_json
from ._wire import (
    AFTER,
    ATTEMPTS,
    CHANNEL,
    COUNT,
    DEFER_MS,
    GROUP,
    INCARNATION,
    KEY,
    LIMIT,
    MAX,
    MAX_PUBLISH,
    MAX_PULL,
    MAX_WAIT_MS,
    OFFSET,
    REFUSED,
    TOPIC,
    answered_int,
    parse_attempts,
)

if TYPE_CHECKING:
    from types import TracebackType

    from .._core._calling._future import ResponseFuture
    from .._faces._streams import BlockingStream, TrioStream
    from .._messaging._records import Fields

__all__ = ["BlockingQueueClient", "BlockingSubscription", "Delivery", "QueueClient",
           "TrioDelivery", "TrioQueueClient", "TrioSubscription"]

# What a blocking call of this module names as the way to do it in trio code.
_TRIO_QUEUE: Final = ("QueueClient(client) over a TrioRemotingClient (remoting.open_client()), "
                      "whose methods are awaited")

DEFAULT_TIMEOUT: Final = 3.0
DEFAULT_ACK_WINDOW: Final = 0.05  # seconds; Pulsar's client groups acknowledgements 100 ms
PULL_SLACK: Final = 5.0  # seconds a pull's call waits past its max_wait
MAX_WAIT_MS_LIMIT: Final = 3_600_000  # the service holds a pull an hour at most

Body = bytes | tuple[bytes, Mapping[str, str]]


# ---------------------------------------------------------------------- requests and replies

def _request(code: QueueCode, fields: dict[str, str], body: bytes | None = None
             ) -> RemotingCommand:
    return RemotingCommand.create_request(code, header=fields, body=body)


def _name(kind: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{kind} must be a str, got {value!r}")
    return value


def publish_request(topic: str, bodies: Iterable[Body], defer: float, key: str | None
                    ) -> tuple[RemotingCommand, int]:
    """Return a PUBLISH request of ``bodies`` and how many messages it carries.

    Raises:
        TypeError, ValueError: a body that is not bytes (or ``(bytes, headers)``), no body
            or more than `MAX_PUBLISH`, bad headers (more than 64 in a message, 65,536 in
            the publish), a ``defer`` that is not seconds >= 0, a ``key`` that is not a str.
    """
    fields = {TOPIC: _name("topic", topic)}
    contents = []
    header_count = 0
    for item in bodies:
        if isinstance(item, tuple):
            body, headers = item
            contents.append(encode_content(headers, body))
            header_count += len(headers) if headers else 0
        else:
            contents.append(encode_content(None, item))
    if not contents:
        raise ValueError("publish_many needs at least one body")
    if len(contents) > MAX_PUBLISH:
        raise ValueError(f"a publish carries at most {MAX_PUBLISH} messages, got "
                         f"{len(contents)}: split the batch")
    if header_count > MAX_PUBLISH_HEADERS:
        raise ValueError(f"a publish carries at most {MAX_PUBLISH_HEADERS} headers in all, "
                         f"got {header_count}: split the batch")
    defer = seconds("defer", defer)
    if defer:
        fields[DEFER_MS] = str(_ms(defer))
    if key is not None:
        fields[KEY] = _name("key", key)
    return _request(QueueCode.PUBLISH, fields, pack_entries(contents)), len(contents)


def pull_request(topic: str, group: str | None, offset: int | None, max_messages: int,
                 max_wait: float, incarnation: str | None = None) -> RemotingCommand:
    """Return a PULL request (``incarnation``: refused with PULL_OFFSET_MOVED unless the
    topic's log is that one, see `TopicOffsets`).

    Raises:
        TypeError, ValueError: neither ``group`` nor ``offset``, an offset below 0,
            ``max_messages`` out of 1-4096, ``max_wait`` not seconds >= 0.
    """
    fields = {TOPIC: _name("topic", topic)}
    if incarnation is not None:
        fields[INCARNATION] = _name("incarnation", incarnation)
    if group is not None:
        fields[GROUP] = _name("group", group)
    if offset is not None:
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        fields[OFFSET] = str(offset)
    if group is None and offset is None:
        raise ValueError("a pull reads from a group's offset or from an offset: give one")
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or not (
            1 <= max_messages <= MAX_PULL):
        raise ValueError(f"max_messages must be an int from 1 to {MAX_PULL}, got "
                         f"{max_messages!r}")
    fields[MAX] = str(max_messages)
    fields[MAX_WAIT_MS] = str(min(MAX_WAIT_MS_LIMIT, _ms(seconds("max_wait", max_wait))))
    return _request(QueueCode.PULL, fields)


def commit_request(topic: str, group: str, offset: int) -> RemotingCommand:
    """Return a COMMIT request.

    Raises:
        TypeError, ValueError: a name that is not a str, an offset that is not an int >= 0.
    """
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an int >= 0, got {offset!r}")
    return _request(QueueCode.COMMIT, {TOPIC: _name("topic", topic),
                                       GROUP: _name("group", group), OFFSET: str(offset)})


def subscribe_request(topic: str, channel: str) -> RemotingCommand:
    """Return a SUBSCRIBE request (the stream's opening request)."""
    return _request(QueueCode.SUBSCRIBE, {TOPIC: _name("topic", topic),
                                          CHANNEL: _name("channel", channel)})


def checked(addr: str | None, reply: RemotingCommand) -> RemotingCommand:
    """Return ``reply`` if it is SUCCESS.

    Raises:
        QueueError: the service refused the request (`QueueFullError`: the topic is full).
    """
    if reply.code != ResponseCode.SUCCESS:
        raise refusal_error(addr, reply.code, reply.remark)
    return reply




def published_offsets(addr: str | None, reply: RemotingCommand) -> list[int]:
    """Return the offsets a PUBLISH's reply gave its messages."""
    first = answered_int(addr, checked(addr, reply).ext_fields, OFFSET)
    return list(range(first, first + answered_int(addr, reply.ext_fields, COUNT)))


def offsets_of(addr: str | None, reply: RemotingCommand) -> TopicOffsets:
    """Return the `TopicOffsets` of an OFFSETS reply."""
    raw = orjson.loads(checked(addr, reply).body or b"{}")
    return TopicOffsets(earliest=raw["earliest"], end=raw["end"], groups=dict(raw["groups"]),
                        readable=raw.get("readable", raw["end"]),  # an older service
                        incarnation=raw.get("incarnation"))


def stats_request(topic: str | None, after: str | None, limit: int | None
                  ) -> RemotingCommand:
    """Return a STATS request: the service's totals; with ``topic``, that topic in detail;
    with ``limit``, a page of topics after ``after``.

    Raises:
        TypeError, ValueError: a name that is not a str, a ``limit`` that is not an int
            from 1 to 1,000.
    """
    fields: dict[str, str] = {}
    if topic is not None:
        fields[TOPIC] = _name("topic", topic)
    if after is not None:
        fields[AFTER] = _name("after", after)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or not (
                1 <= limit <= MAX_TOPICS_PER_PAGE):
            raise ValueError(f"limit must be an int from 1 to {MAX_TOPICS_PER_PAGE}, got "
                             f"{limit!r}")
        fields[LIMIT] = str(limit)
    return _request(QueueCode.STATS, fields)


def offsets_request(topic: str, offset: int | None) -> RemotingCommand:
    """Return an OFFSETS request (``offset``: where ``readable`` is counted from).

    Raises:
        TypeError, ValueError: a topic that is not a str, an offset that is not an int >= 0.
    """
    fields = {TOPIC: _name("topic", topic)}
    if offset is not None:
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        fields[OFFSET] = str(offset)
    return _request(QueueCode.OFFSETS, fields)


def _may_move(addr: str | None, ended: RemotingStreamError, acks: _Acks) -> bool:
    """True if a subscription whose stream ended with ``ended`` subscribes again: one made
    with the address list (``addr`` None), still open, whose server drained (GO_AWAY) or
    whose connection was lost."""
    return (addr is None and not acks.closed
            and (ended.code is None or ended.code == ResponseCode.GO_AWAY))


def _stream_refusal(error: RemotingStreamError) -> RemotingError:
    """A subscription the service refused is a `QueueError`; a stream failure stays one."""
    if error.code is None or error.code == ResponseCode.GO_AWAY:
        return error
    return refusal_error(error.addr, error.code, error.remark)


# ---------------------------------------------------------------------- the factory

class QueueClient:
    """The queue service's calls over ``client``: a `BlockingQueueClient` for a
    `RemotingClient`, a `TrioQueueClient` for a `TrioRemotingClient`.

    Raises:
        TypeError: ``client`` is neither.
    """

    @overload
    def __new__(cls, client: RemotingClient) -> BlockingQueueClient: ...

    @overload
    def __new__(cls, client: TrioRemotingClient) -> TrioQueueClient: ...

    def __new__(cls, client: RemotingClient | TrioRemotingClient) -> Any:
        if cls is QueueClient:
            if isinstance(client, RemotingClient):
                cls = BlockingQueueClient
            elif isinstance(client, TrioRemotingClient):
                cls = TrioQueueClient
            else:
                raise TypeError(f"QueueClient needs a RemotingClient or a TrioRemotingClient, "
                                f"got {type(client).__name__}")
        return object.__new__(cls)


# ---------------------------------------------------------------------- blocking

_Sub = TypeVar("_Sub", "BlockingSubscription", "TrioSubscription")


class _Delivered(Message, Generic[_Sub]):
    """A delivered message, as both faces hold it: its fields, its subscription, and the
    acknowledgements of the stream it came on (`_Acks`)."""

    __slots__ = ("_acks", "_done", "_sub")

    def __init__(self, topic: str, fields: Fields, attempts: int, sub: _Sub,
                 acks: _Acks) -> None:
        self.topic = topic  # the fields set here, not through Message: a call less per message
        self.offset = fields[0]
        self.timestamp = fields[1] / 1000
        self.headers = fields[3]
        self.body = fields[4]
        self.attempts = attempts
        self._sub: _Sub = sub
        self._acks = acks
        self._done = False


class Delivery(_Delivered["BlockingSubscription"]):
    """A message delivered by a blocking subscription: finish it with `ack`, give it back
    with `requeue`, or ask for more time with `touch`."""

    __slots__ = ()

    def ack(self) -> None:
        """Finish the message (NSQ's FIN); it is not delivered again.

        Raises:
            QueueError: it was acknowledged or requeued already, or the subscription is
                closed (the message went back to the channel).
        """
        self._sub._settle(self, AckOp.FINISH, 0)

    def requeue(self, delay: float = 0.0) -> None:
        """Give the message back, to be delivered again after ``delay`` seconds (NSQ's REQ).

        Raises:
            QueueError: as `ack`.
            TypeError, ValueError: ``delay`` is not seconds >= 0.
        """
        self._sub._settle(self, AckOp.REQUEUE, _delay_ms(delay))

    def touch(self) -> None:
        """Reset the message's timeout: ``msg_timeout`` more seconds from now (NSQ's TOUCH).

        Raises:
            QueueError: as `ack`.
        """
        self._sub._settle(self, AckOp.TOUCH, 0)


def _delay_ms(delay: float) -> int:
    return _ms(seconds("delay", delay))


def _ms(duration: float) -> int:
    """Return ``duration`` (seconds, infinity allowed) in whole ms, at most `MAX_DELAY_MS`."""
    return math.ceil(min(MAX_DELAY_MS, duration * 1000))


class _Acks:
    """A subscription's acknowledgements: grouped, sent on the stream's connection, and
    their answers read (shared by both faces)."""

    def __init__(self, addr: str | None, topic: str, channel: str, stream_id: int,
                 credits: int, window: float) -> None:
        self.addr = addr
        self.topic = topic
        self.channel = channel
        self.stream_id = stream_id
        self.credits = credits
        self.group = AckGroup(max(1, credits // 2), window)
        # ACKs sent with an answer to come, and how many acknowledgements each carries
        self.sent: deque[tuple[ResponseFuture, int]] = deque()
        self.acked = self.requeued = self.touched = self.refused = 0
        self.closed = False
        self._said_unsent = False  # logged (warning) that some could not be applied

    def moved_to(self, stream_id: int) -> _Acks:
        """Return the acknowledgements of the subscription's next stream (it moved to
        another server), with the same counts. Those pending here cannot reach the server
        they were for (its stream is over, and its deliveries went back to its channel):
        they count as refused."""
        moved = _Acks(self.addr, self.topic, self.channel, stream_id, self.credits,
                      self.group.window)
        moved.acked, moved.requeued, moved.touched = self.acked, self.requeued, self.touched
        moved.refused = self.refused + len(self.group.take())
        return moved

    def stale(self, delivery: Message, done: bool) -> None:
        """Count an acknowledgement of a delivery that came on a stream the subscription
        has left (it moved to another server): it cannot be applied, its message went back
        to that server's channel, so it counts as refused.

        Raises:
            QueueError: as `add`.
        """
        self.check(delivery, done)
        self.refused += 1
        log.debug("queue.ack_refused", topic=self.topic, channel=self.channel, code=None,
                  refused=1)

    def check(self, delivery: Message, done: bool) -> None:
        """Raise if ``delivery`` may not be acknowledged now.

        Raises:
            QueueError: it was finished or requeued already, or the subscription is closed.
        """
        if done:
            closed = " (and the subscription is closed)" if self.closed else ""
            raise QueueError(self.addr, None, f"{delivery.id} was finished or requeued "
                             f"already{closed}: this acknowledgement changes nothing")
        if self.closed:
            raise QueueError(self.addr, None, f"the subscription is closed: {delivery.id} went "
                             "back to the channel (it will be delivered again)")

    def unsent(self, count: int, reason: str) -> None:
        """Count ``count`` acknowledgements that cannot be applied (``reason``: why): their
        messages will be delivered again. Logged as ``queue.ack_refused``, a warning the
        first time for the subscription."""
        if not count:
            return
        self.refused += count
        level = log.debug if self._said_unsent else log.warning
        self._said_unsent = True
        level("queue.ack_refused", topic=self.topic, channel=self.channel, code=None,
              refused=count, reason=reason)

    def add(self, delivery: Message, done: bool, op: AckOp, delay_ms: int, now: float
            ) -> bool:
        """Record one acknowledgement; return True if the group is due to be sent.

        Raises:
            QueueError: ``delivery`` was finished or requeued already (``done``), or the
                subscription is closed.
        """
        self.check(delivery, done)
        self.made(op)
        return self.group.add(op, delivery.offset, now, delay_ms)

    def made(self, op: AckOp) -> None:
        """Count an acknowledgement made (in ``acked``, ``requeued`` or ``touched``)."""
        if op is AckOp.FINISH:
            self.acked += 1
        elif op is AckOp.REQUEUE:
            self.requeued += 1
        else:
            self.touched += 1

    def request(self, oneway: bool = False, even_empty: bool = False
                ) -> tuple[RemotingCommand, int] | None:
        """Return the ACK request of what is pending and how many it carries (None: nothing,
        unless ``even_empty``: an empty ACK's answer says every ACK before it was applied).
        A ``oneway`` one gets no answer: its refusals come back on the stream."""
        acks = self.group.take()
        if not acks and not even_empty:
            return None
        request = _request(QueueCode.ACK, {STREAM_ID: str(self.stream_id), TOPIC: self.topic,
                                           CHANNEL: self.channel}, pack_acks(acks))
        if oneway:
            request.flag |= FLAG_ONEWAY
        return request, len(acks)

    def collect(self) -> None:
        """Read the answers of the ACKs sent that have come back."""
        sent = self.sent
        while sent and sent[0][0].done():
            fut, count = sent.popleft()
            try:
                reply = fut.result(0)
            except RemotingError as exc:  # the connection failed: the stream ends with it
                log.debug("queue.ack_failed", topic=self.topic, channel=self.channel,
                          error=str(exc))
                self.unsent(count, f"its ACK got no answer ({type(exc).__name__})")
                continue
            if reply.code != ResponseCode.SUCCESS:
                self.unsent(count, f"its ACK was answered code {reply.code}: {reply.remark}")
                continue
            refused = answered_int(self.addr, reply.ext_fields, REFUSED)
            if refused:
                self.note_refused(refused, reply.code)

    def note_refused(self, refused: int, code: int | None) -> None:
        """The service refused ``refused`` acknowledgements (in an ACK's answer, or a notice
        on the stream for oneway ones)."""
        self.refused += refused
        log.warning("queue.ack_refused", topic=self.topic, channel=self.channel,
                    code=code, refused=refused)


def _deliveries(item: RemotingCommand, acks: _Acks) -> list[tuple[Fields, int]]:
    """Return the deliveries an item carries (none for a notice of refused acknowledgements,
    which it counts)."""
    ext = item.ext_fields or {}
    refused = ext.get(REFUSED)
    if refused is not None:
        acks.note_refused(answered_int(acks.addr, ext, REFUSED), None)
        return []
    try:
        tries = parse_attempts(ext.get(ATTEMPTS))
    except ValueError as exc:
        raise QueueError(acks.addr, None, f"the service sent bad {ATTEMPTS}: {exc}") from None
    fields = record_fields(item.body or b"")
    if not tries:
        return [(f, 1) for f in fields]
    return [(f, tries.get(f[0], 1)) for f in fields]


_Client = TypeVar("_Client", RemotingClient, TrioRemotingClient)
_Stream = TypeVar("_Stream", "BlockingStream", "TrioStream")
_Delivery = TypeVar("_Delivery", "Delivery", "TrioDelivery")


class _Subscription(Generic[_Client, _Stream, _Delivery]):
    """What both faces' subscriptions hold: the stream deliveries come on, their
    acknowledgements (`_Acks`), the deliveries received and not yet read, and the counters."""

    def __init__(self, client: _Client, stream: _Stream, topic: str, channel: str,
                 credits: int, ack_window: float, timeout: float, addr: str | None) -> None:
        self._client: _Client = client
        self._caller = client.endpoint.caller
        self._stream: _Stream = stream
        self._addr = addr  # as subscribed: None moves along the address list
        self._timeout = timeout
        self._acks = _Acks(stream.addr, topic, channel, stream.stream_id, credits, ack_window)
        self._ready: deque[_Delivery] = deque()
        self._ended = False
        self.topic = topic
        self.channel = channel
        self.received = 0
        self.moves = 0

    def _moved_to(self, stream: _Stream, ended: RemotingStreamError) -> None:
        """Take ``stream``, subscribed again after ``ended``, in place of the old one: the
        acknowledgements go on there, and what was read but not taken is the old server's
        (back to its channel, no longer acknowledgeable)."""
        self._stream = stream
        self._acks = self._acks.moved_to(stream.stream_id)
        self._ready.clear()
        self.moves += 1
        log.info("queue.resubscribed", topic=self.topic, channel=self.channel,
                 reason="GO_AWAY" if ended.code == ResponseCode.GO_AWAY else "connection lost")

    def _record(self, delivery: _Delivery, op: AckOp, delay_ms: int, now: float) -> bool:
        """Record ``op`` for ``delivery``; True when the acknowledgements are due to be sent.
        A delivery from a server the subscription has left is only counted (refused)."""
        acks = self._acks
        if delivery._acks is not acks:
            acks.stale(delivery, delivery._done)
            due = False
        elif self._stream.ended and not acks.closed:
            # its stream is over (the server drained, or the connection was lost): the
            # service gave its deliveries back to the channel, nothing can apply this one
            acks.check(delivery, delivery._done)
            acks.made(op)
            acks.unsent(1, "made after the subscription's stream had ended")
            due = False
        else:
            due = acks.add(delivery, delivery._done, op, delay_ms, now)
        if op is not AckOp.TOUCH:
            delivery._done = True
        return due

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


class BlockingSubscription(_Subscription[RemotingClient, "BlockingStream", Delivery]):
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

    def __init__(self, client: RemotingClient, stream: BlockingStream, topic: str,
                 channel: str, credits: int, ack_window: float, timeout: float,
                 addr: str | None = None) -> None:
        super().__init__(client, stream, topic, channel, credits, ack_window, timeout, addr)
        self._lock = threading.Lock()  # deliveries may be acknowledged from any thread

    def __repr__(self) -> str:
        return f"<BlockingSubscription {self.topic}/{self.channel} from {self._stream.addr}>"

    @blocking_call("BlockingSubscription.receive", _TRIO_QUEUE)
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
        until = None if timeout is None else monotonic() + timeout
        while not self._ready:
            if self._ended:
                return None
            acks = self._acks
            now = monotonic()
            if acks.group.due(now):
                self.flush()
            marks = [m for m in (acks.group.deadline, until) if m is not None]
            wait = max(0.0, min(marks) - now) if marks else None
            try:
                item = self._stream.receive(wait)
            except TimeoutError:
                if until is not None and monotonic() >= until:
                    raise TimeoutError(f"no message within {timeout}s") from None
                continue
            except RemotingStreamError as exc:
                if not _may_move(self._addr, exc, acks):
                    raise
                self._move(exc)
                continue
            if item is None:
                self._ended = True
                return None
            batch = _deliveries(item, acks)
            self._ready.extend(Delivery(self.topic, fields, attempts, self, acks)
                               for fields, attempts in batch)
            self.received += len(batch)
        return self._ready.popleft()

    def _move(self, ended: RemotingStreamError) -> None:
        """Subscribe again through the address list (see `receive`).

        Raises:
            remoting.RemotingStreamError: ``ended``, if subscribing again failed (its
                cause says why).
        """
        try:
            stream = self._client.open_stream(
                None, subscribe_request(self.topic, self.channel), self._acks.credits,
                self._timeout, auto_credit=False)
        except RemotingError as exc:
            raise ended from exc
        with self._lock:
            self._moved_to(stream, ended)

    def __iter__(self) -> Self:
        return self

    @blocking_call("BlockingSubscription.__next__ (for msg in sub)", _TRIO_QUEUE)
    def __next__(self) -> Delivery:
        delivery = self.receive()
        if delivery is None:
            raise StopIteration
        return delivery

    def _settle(self, delivery: Delivery, op: AckOp, delay_ms: int) -> None:
        with self._lock:
            due = self._record(delivery, op, delay_ms, monotonic())
        if due:
            self.flush()

    def flush(self) -> None:
        """Send the acknowledgements pending now (from any thread)."""
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
            fut = self._caller.invoke_async(conn, conn.remote_addr, request, self._timeout,
                                            None)
        except RemotingError as exc:  # the connection is gone: the stream ends with it
            log.debug("queue.ack_failed", topic=self.topic, channel=self.channel,
                      error=str(exc))
            acks.unsent(count, f"its ACK could not be sent ({type(exc).__name__})")
            return
        with self._lock:
            acks.sent.append((fut, count))

    @blocking_call("BlockingSubscription.close", _TRIO_QUEUE)
    def close(self) -> None:
        """Send the pending acknowledgements, wait for their answers, and end the
        subscription: the deliveries not finished go back to the channel (idempotent)."""
        acks = self._acks
        if acks.closed:
            return
        try:
            self.flush()
            for fut, _ in list(acks.sent):
                try:
                    fut.result(self._timeout)
                except (RemotingError, TimeoutError):
                    pass
            with self._lock:
                acks.collect()
        finally:
            with self._lock:
                acks.closed = True
            self._stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class BlockingQueueClient(QueueClient):
    """The queue service's calls for a blocking `RemotingClient` (any thread but its loop's).

    Every call raises `QueueError` when the service refuses it (the message says why) and the
    transport's errors (`RemotingConnectError`, `RemotingTimeoutError`...) as `invoke_sync`.
    """

    def __init__(self, client: RemotingClient) -> None:
        self.client = client

    def _call(self, addr: str | None, request: RemotingCommand, timeout: float
              ) -> RemotingCommand:
        return checked(addr, self.client.invoke_sync(addr, request, timeout))

    @blocking_call("QueueClient.publish", _TRIO_QUEUE)
    def publish(self, addr: str | None, topic: str, body: bytes,
                headers: Mapping[str, str] | None = None, defer: float = 0.0, *,
                key: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Append one message to ``topic`` (made if new); return its offset once the service
        has it (see docs/queue.md for when it is on disk).

        Args:
            defer: seconds before it may be delivered (NSQ's DPUB).
            key: an idempotence key: a publish repeated with it within the service's
                ``dedup_window`` appends nothing and returns the first one's offset.

        Raises:
            QueueFullError: the topic is full (no data directory); nothing was appended.
            QueueError: a bad topic name or message.
        """
        request, _ = publish_request(topic, [(body, headers or {})], defer, key)
        return published_offsets(addr, self.client.invoke_sync(addr, request, timeout))[0]

    @blocking_call("QueueClient.publish_many", _TRIO_QUEUE)
    def publish_many(self, addr: str | None, topic: str, bodies: Iterable[Body], *,
                     defer: float = 0.0, key: str | None = None,
                     timeout: float = DEFAULT_TIMEOUT) -> list[int]:
        """Append messages (``bytes``, or ``(bytes, headers)``) in one request: all or none;
        return their offsets (consecutive). ``defer`` and ``key`` as `publish`.

        Raises:
            ValueError: no message, or more than 16,384 (`MAX_PUBLISH`): nothing is sent.
            QueueFullError, QueueError: as `publish`.
        """
        request, _ = publish_request(topic, bodies, defer, key)
        return published_offsets(addr, self.client.invoke_sync(addr, request, timeout))

    @blocking_call("QueueClient.subscribe", _TRIO_QUEUE)
    def subscribe(self, addr: str | None, topic: str, channel: str, credits: int = 64, *,
                  ack_window: float = DEFAULT_ACK_WINDOW, timeout: float = DEFAULT_TIMEOUT
                  ) -> BlockingSubscription:
        """Subscribe to ``channel`` of ``topic`` (the channel is made if new, starting at the
        earliest message held): ``with q.subscribe(...) as sub: for msg in sub``.

        Args:
            credits: deliveries held at most before acknowledging (1 to 65,536).
            ack_window: seconds an acknowledgement waits at most to travel with others.

        Raises:
            QueueError: the topic does not exist (``TOPIC_NOT_EXIST``) or a name is bad.
            TypeError, ValueError: ``credits`` or ``ack_window`` out of range.
        """
        credits = credits_of(credits)
        window = seconds("ack_window", ack_window)
        try:
            stream = self.client.open_stream(addr, subscribe_request(topic, channel), credits,
                                             timeout, auto_credit=False)
        except RemotingStreamError as exc:
            raise _stream_refusal(exc) from exc
        return BlockingSubscription(self.client, stream, topic, channel, credits, window,
                                    timeout, addr)

    @blocking_call("QueueClient.pull", _TRIO_QUEUE)
    def pull(self, addr: str | None, topic: str, group: str | None = None,
             max_messages: int = 32, max_wait: float = 15.0, *, offset: int | None = None,
             incarnation: str | None = None, timeout: float | None = None) -> list[Message]:
        """Return up to ``max_messages`` messages from ``offset``, or from ``group``'s
        committed offset (the earliest held if it never committed), waiting up to
        ``max_wait`` seconds for one if there are none (the service holds the request).
        The group's offset does not move: `commit` it. With ``incarnation`` (from
        `offsets`), only from that log of the topic.

        Raises:
            QueueError: the topic does not exist, the offset is past its end, or the topic
                is another log than ``incarnation`` (``PULL_OFFSET_MOVED``: the service
                started it afresh; read its offsets again).
        """
        request = pull_request(topic, group, offset, max_messages, max_wait, incarnation)
        reply = self._call(addr, request, max_wait + PULL_SLACK if timeout is None
                           else timeout)
        return messages_of(topic, reply.body)

    @blocking_call("QueueClient.commit", _TRIO_QUEUE)
    def commit(self, addr: str | None, topic: str, group: str, offset: int, *,
               timeout: float = DEFAULT_TIMEOUT) -> None:
        """Set ``group``'s offset: the next message it reads (the last it processed + 1)."""
        self._call(addr, commit_request(topic, group, offset), timeout)

    @blocking_call("QueueClient.offsets", _TRIO_QUEUE)
    def offsets(self, addr: str | None, topic: str, *, offset: int | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> TopicOffsets:
        """Return ``topic``'s earliest and end offsets, its groups' offsets, how far a pull
        from ``offset`` (default: the earliest) reads now (``readable``), and the id of its
        log (``incarnation``: another one after a service without a data directory
        restarted)."""
        return offsets_of(addr, self.client.invoke_sync(addr, offsets_request(topic, offset),
                                                        timeout))

    @blocking_call("QueueClient.create_topic", _TRIO_QUEUE)
    def create_topic(self, addr: str | None, topic: str, *,
                     timeout: float = DEFAULT_TIMEOUT) -> None:
        """Make ``topic`` if it does not exist (subscriptions and pulls need it)."""
        self._call(addr, _request(QueueCode.CREATE_TOPIC, {TOPIC: _name("topic", topic)}),
                   timeout)

    @blocking_call("QueueClient.statistics", _TRIO_QUEUE)
    def statistics(self, addr: str | None, topic: str | None = None, *,
                   after: str | None = None, limit: int | None = None,
                   timeout: float = DEFAULT_TIMEOUT) -> QueueStatistics:
        """Return the service's statistics: its totals (topics, channels, groups, memory,
        held pulls, problems); with ``topic``, that topic with its channels and groups;
        with ``limit`` (1 to 1,000), a page of topics in name order after ``after``, each
        with its counts (``next_after``: where the next page starts). An answer is
        bounded whatever the service holds.

        Raises:
            TypeError, ValueError: a bad ``limit`` (nothing is sent).
        """
        reply = self._call(addr, stats_request(topic, after, limit), timeout)
        return statistics_from_json(reply.body or b"{}")


# ---------------------------------------------------------------------- trio

class TrioDelivery(_Delivered["TrioSubscription"]):
    """A message delivered by a trio subscription: ``await msg.ack()`` (see `Delivery`)."""

    __slots__ = ()

    async def ack(self) -> None:
        """Finish the message (see `Delivery.ack`)."""
        await self._sub._settle(self, AckOp.FINISH, 0)

    async def requeue(self, delay: float = 0.0) -> None:
        """Give the message back (see `Delivery.requeue`)."""
        await self._sub._settle(self, AckOp.REQUEUE, _delay_ms(delay))

    async def touch(self) -> None:
        """Reset the message's timeout (see `Delivery.touch`)."""
        await self._sub._settle(self, AckOp.TOUCH, 0)


class TrioSubscription(_Subscription[TrioRemotingClient, "TrioStream", TrioDelivery]):
    """A trio subscription: ``async for msg in sub`` (see `BlockingSubscription`)."""

    def __init__(self, client: TrioRemotingClient, stream: TrioStream, topic: str,
                 channel: str, credits: int, ack_window: float, timeout: float,
                 addr: str | None = None) -> None:
        super().__init__(client, stream, topic, channel, credits, ack_window, timeout, addr)
        self._now = trio.lowlevel.current_clock().current_time  # bound once: read per message

    async def receive(self) -> TrioDelivery | None:
        """Return the next delivery, waiting for it; None once the subscription ended.

        Raises:
            remoting.RemotingStreamError: as `BlockingSubscription.receive` (with
                ``addr=None`` it subscribes again through the address list first).
        """
        while not self._ready:
            if self._ended:
                return None
            acks = self._acks
            if acks.group.due(self._now()):
                await self.flush()
            item: RemotingCommand | None = None
            try:
                with trio.move_on_at(acks.group.deadline or math.inf):
                    item = await self._stream.receive()
                    if item is None:
                        self._ended = True
                        return None
            except RemotingStreamError as exc:
                if not _may_move(self._addr, exc, acks):
                    raise
                await self._move(exc)
                continue
            if item is None:
                continue
            batch = _deliveries(item, acks)
            self._ready.extend(TrioDelivery(self.topic, fields, attempts, self, acks)
                               for fields, attempts in batch)
            self.received += len(batch)
        return self._ready.popleft()

    async def _move(self, ended: RemotingStreamError) -> None:
        """Subscribe again through the address list (see `BlockingSubscription.receive`).

        Raises:
            remoting.RemotingStreamError: ``ended``, if subscribing again failed (its
                cause says why).
        """
        try:
            stream = await open_trio_stream(
                self._client.endpoint, None, subscribe_request(self.topic, self.channel),
                self._acks.credits, self._timeout, False)
        except RemotingError as exc:
            raise ended from exc
        self._moved_to(stream, ended)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> TrioDelivery:
        delivery = await self.receive()
        if delivery is None:
            raise StopAsyncIteration
        return delivery

    async def _settle(self, delivery: TrioDelivery, op: AckOp, delay_ms: int) -> None:
        if self._record(delivery, op, delay_ms, self._now()):
            await self.flush()

    async def flush(self) -> None:
        """Send the acknowledgements pending now."""
        acks = self._acks
        made = acks.request(oneway=True)  # on the loop, a oneway send costs no answer
        conn = self._stream._conn
        if made is None:
            return
        request, count = made
        if conn is None or conn.closed:
            acks.unsent(count, "the subscription's connection is gone")
            return
        try:
            await self._caller.ainvoke_oneway(conn, conn.remote_addr, request, self._timeout)
        except RemotingError as exc:
            log.debug("queue.ack_failed", topic=self.topic, channel=self.channel,
                      error=str(exc))
            acks.unsent(count, f"its ACK could not be sent ({type(exc).__name__})")
        # let the connection's writer send it now: the consumer goes on with the deliveries
        # it holds without another checkpoint, and the service's credits come back meanwhile
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """End the subscription (see `BlockingSubscription.close`)."""
        acks = self._acks
        if acks.closed:
            return
        try:
            # the last group goes two-way: its answer comes once every ACK before it was
            # applied, after the notices of their refusals (one connection keeps the order)
            made = acks.request(even_empty=True)
            conn = self._stream._conn
            if made is not None:
                request, count = made
                if conn is None or conn.closed:
                    acks.unsent(count, "the subscription's connection is gone")
                else:
                    with trio.move_on_after(self._timeout):
                        try:
                            fut = await self._caller.ainvoke_async(
                                conn, conn.remote_addr, request, self._timeout, None)
                            acks.sent.append((fut, count))
                            await fut.wait()
                        except RemotingError as exc:
                            acks.unsent(count, f"its ACK could not be sent "
                                        f"({type(exc).__name__})")
            acks.collect()
            for item in self._stream._items:
                _deliveries(item, acks)  # count the notices; the deliveries go back
        finally:
            acks.closed = True
            with trio.CancelScope(shield=True), trio.move_on_after(self._timeout):
                await self._stream.aclose()


class TrioQueueClient(QueueClient):
    """The queue service's calls for a `TrioRemotingClient`: `BlockingQueueClient`'s, awaited
    (``subscribe`` is an async context manager)."""

    def __init__(self, client: TrioRemotingClient) -> None:
        self.client = client

    async def _call(self, addr: str | None, request: RemotingCommand, timeout: float
                    ) -> RemotingCommand:
        return checked(addr, await self.client.invoke_sync(addr, request, timeout))

    async def publish(self, addr: str | None, topic: str, body: bytes,
                      headers: Mapping[str, str] | None = None, defer: float = 0.0, *,
                      key: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> int:
        """See `BlockingQueueClient.publish`."""
        request, _ = publish_request(topic, [(body, headers or {})], defer, key)
        return published_offsets(addr, await self.client.invoke_sync(addr, request,
                                                                     timeout))[0]

    async def publish_many(self, addr: str | None, topic: str, bodies: Iterable[Body], *,
                           defer: float = 0.0, key: str | None = None,
                           timeout: float = DEFAULT_TIMEOUT) -> list[int]:
        """See `BlockingQueueClient.publish_many`."""
        request, _ = publish_request(topic, bodies, defer, key)
        return published_offsets(addr, await self.client.invoke_sync(addr, request, timeout))

    @asynccontextmanager
    async def subscribe(self, addr: str | None, topic: str, channel: str, credits: int = 64,
                        *, ack_window: float = DEFAULT_ACK_WINDOW,
                        timeout: float = DEFAULT_TIMEOUT) -> AsyncIterator[TrioSubscription]:
        """``async with q.subscribe(...) as sub: async for msg in sub: await msg.ack()``
        (see `BlockingQueueClient.subscribe`)."""
        credits = credits_of(credits)
        window = seconds("ack_window", ack_window)
        try:
            stream_context = self.client.open_stream(addr, subscribe_request(topic, channel),
                                                     credits, timeout, auto_credit=False)
            stream = await stream_context.__aenter__()
        except RemotingStreamError as exc:
            raise _stream_refusal(exc) from exc
        sub = TrioSubscription(self.client, stream, topic, channel, credits, window, timeout,
                               addr)
        try:
            yield sub
        finally:
            try:
                await sub.aclose()
            finally:  # cancelled while sending its last acknowledgements: still closed
                await stream_context.__aexit__(None, None, None)

    async def pull(self, addr: str | None, topic: str, group: str | None = None,
                   max_messages: int = 32, max_wait: float = 15.0, *,
                   offset: int | None = None, incarnation: str | None = None,
                   timeout: float | None = None) -> list[Message]:
        """See `BlockingQueueClient.pull`."""
        request = pull_request(topic, group, offset, max_messages, max_wait, incarnation)
        reply = await self._call(addr, request, max_wait + PULL_SLACK if timeout is None
                                 else timeout)
        return messages_of(topic, reply.body)

    async def commit(self, addr: str | None, topic: str, group: str, offset: int, *,
                     timeout: float = DEFAULT_TIMEOUT) -> None:
        """See `BlockingQueueClient.commit`."""
        await self._call(addr, commit_request(topic, group, offset), timeout)

    async def offsets(self, addr: str | None, topic: str, *, offset: int | None = None,
                      timeout: float = DEFAULT_TIMEOUT) -> TopicOffsets:
        """See `BlockingQueueClient.offsets`."""
        return offsets_of(addr, await self.client.invoke_sync(
            addr, offsets_request(topic, offset), timeout))

    async def create_topic(self, addr: str | None, topic: str, *,
                           timeout: float = DEFAULT_TIMEOUT) -> None:
        """See `BlockingQueueClient.create_topic`."""
        await self._call(addr, _request(QueueCode.CREATE_TOPIC,
                                        {TOPIC: _name("topic", topic)}), timeout)

    async def statistics(self, addr: str | None, topic: str | None = None, *,
                         after: str | None = None, limit: int | None = None,
                         timeout: float = DEFAULT_TIMEOUT) -> QueueStatistics:
        """See `BlockingQueueClient.statistics`."""
        reply = await self._call(addr, stats_request(topic, after, limit), timeout)
        return statistics_from_json(reply.body or b"{}")
