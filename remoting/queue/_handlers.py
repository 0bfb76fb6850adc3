"""The queue service's request handlers: one processor per `QueueCode`, all on the event loop.

Each reads its fields through `_wire` (a bad one is answered with the `Refusal`'s code and
remark: the connection and everything else go on) and acts on the service's topics.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

import orjson
import trio

from codec import FLAG_ONEWAY, RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, StreamProcessor

from .._hooks import AbortProcessError
from .._messaging._codes import STREAM_ID
from .._messaging._credits import MAX_CREDITS
from ._refusals import disk_failed
from ._sansio._acks import ACK_BYTES, unpack_acks
from ._sansio._records import (
    RecordError,
    TooManyEntriesError,
    split_entries,
)
from ._stats import MAX_TOPICS_PER_PAGE, statistics_to_json
from ._topic import Cold
from ._wire import (
    AFTER,
    ATTEMPTS,
    CHANNEL,
    COUNT,
    DEFER_MS,
    DUPLICATE,
    END,
    GROUP,
    INCARNATION,
    LIMIT,
    MAX,
    MAX_PUBLISH,
    MAX_PULL,
    MAX_WAIT_MS,
    OFFSET,
    REFUSED,
    TOPIC,
    QueueCode,
    Refusal,
    format_attempts,
    key_of,
    name_of,
    optional_int,
    refusal_response,
    required_int,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from processors import RequestContext, ServerStream

    from .._faces._blocking_server import RemotingServer
    from .._faces._trio import TrioRemotingServer
    from ._broker import Broker, Consumer

__all__ = ["register_handlers"]

MAX_BATCH: Final = 1024  # messages in one delivery frame at most
# A delivery frame carries records up to this many bytes (one record at least); the records
# taken for a subscriber are read a frame's worth at a time, so a large window of large
# messages is never read, nor held, all at once.
MAX_ITEM_BYTES: Final = 1024 * 1024
# Acknowledgements in one ACK at most: what one subscriber may hold (its most credits). A
# body of them is applied in one step of the loop (about a microsecond each).
MAX_ACKS: Final = MAX_CREDITS
MAX_OFFSET: Final = 2**63 - 1
MAX_DEFER_MS: Final = 2**31 - 1  # about 24 days
_U64: Final = struct.Struct(">q")


def _ok(**fields: object) -> RemotingCommand:
    return RemotingCommand.create_response(
        ResponseCode.SUCCESS, header={k: str(v) for k, v in fields.items()} or None)


class _Processor(AsyncRequestProcessor):
    """Runs one handler; a `Refusal` becomes its answer."""

    def __init__(self, handle: Callable[[RequestContext, RemotingCommand],
                                        Awaitable[RemotingCommand | None]]) -> None:
        self._handle = handle

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        try:
            return await self._handle(ctx, request)
        except Refusal as refusal:
            return refusal_response(refusal)


class _Handlers:
    """The handlers of one service: each parses its request, calls the broker, and answers
    (NSQ's ``protocol_v2``: what a request means is the broker's)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def topic_name(self, request: RemotingCommand) -> str:
        """The request's topic name (`name_of`); the name of a topic the service holds is
        taken as it is: it was checked when the topic was made (no pattern match per
        request)."""
        name = (request.ext_fields or {}).get(TOPIC)
        if type(name) is str and name in self.broker.topics:
            return name
        return name_of(request, TOPIC)

    async def publish(self, ctx: RequestContext, request: RemotingCommand
                      ) -> RemotingCommand | None:
        name = self.topic_name(request)
        defer_ms = optional_int(request, DEFER_MS, 0, MAX_DEFER_MS) or 0
        key = key_of(request)
        if not request.body:
            raise Refusal(ResponseCode.MESSAGE_ILLEGAL,
                          "a publish carries its messages in its body (entries)")
        try:
            contents = split_entries(request.body, MAX_PUBLISH)
        except TooManyEntriesError:
            raise Refusal(ResponseCode.INVALID_PARAMETER,
                          f"a publish carries at most {MAX_PUBLISH} messages: split the "
                          "batch") from None
        except RecordError as exc:
            raise Refusal(ResponseCode.MESSAGE_ILLEGAL,
                          f"the messages are not well-formed: {exc}") from None
        first, count, duplicate = await self.broker.publish(name, contents, key, defer_ms)
        header = {OFFSET: str(first), COUNT: str(count)}
        if duplicate:
            header[DUPLICATE] = "true"
        return RemotingCommand.create_response(ResponseCode.SUCCESS, header=header)

    async def create(self, ctx: RequestContext, request: RemotingCommand
                     ) -> RemotingCommand | None:
        topic = self.broker.topic_to_write(name_of(request, TOPIC))
        return _ok(**{END: topic.end})

    async def ack(self, ctx: RequestContext, request: RemotingCommand
                  ) -> RemotingCommand | None:
        broker = self.broker
        stream_id = required_int(request, STREAM_ID, -(2**31), 2**31 - 1)
        consumer = broker.subscription(ctx.channel, stream_id)
        packed = request.body or b""
        if len(packed) > MAX_ACKS * ACK_BYTES:  # a subscriber never holds more deliveries
            raise Refusal(ResponseCode.INVALID_PARAMETER, (
                f"an ACK carries at most {MAX_ACKS} acknowledgements (a subscription's most "
                f"credits), got {len(packed) // ACK_BYTES}: send them in several"))
        try:
            acks = unpack_acks(packed)
        except ValueError as exc:
            raise Refusal(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        refused = broker.settle(consumer, acks, trio.current_time())
        body = b"".join(_U64.pack(offset) for offset in refused) if refused else None
        if request.flag & FLAG_ONEWAY:  # no answer: the refusals go back on the stream
            if body is not None:
                notice = RemotingCommand.create_request(QueueCode.ACK, body=body)
                notice.ext_fields = {REFUSED: str(len(refused))}
                consumer.stream.send_nowait(notice, cost=0)
            return None
        response = _ok(**{REFUSED: len(refused)})
        response.body = body
        return response

    async def pull(self, ctx: RequestContext, request: RemotingCommand
                   ) -> RemotingCommand | None:
        broker = self.broker
        topic = broker.existing(self.topic_name(request))
        group = None if (request.ext_fields or {}).get(GROUP) is None else name_of(
            request, GROUP)
        offset = optional_int(request, OFFSET, 0, MAX_OFFSET)
        if group is None and offset is None:
            raise Refusal(ResponseCode.INVALID_PARAMETER,
                          "a pull reads from a group's offset or from an offset: give one")
        count = optional_int(request, MAX, 1, MAX_PULL) or 32
        wait_ms = optional_int(request, MAX_WAIT_MS, 0, 3_600_000) or 0
        start = offset if offset is not None else topic.groups.get(group, 0)  # type: ignore[arg-type]
        incarnation = (request.ext_fields or {}).get(INCARNATION)
        pulled = broker.pull_now(topic, start, count, incarnation)
        if isinstance(pulled, Cold):  # the records need the disk: read in a worker thread
            body = await broker.pull(topic, start, count, incarnation)
        else:
            body = pulled
        if body is not None or not wait_ms:
            return _answer(body)
        broker.hold_pull(ctx, request, topic, start, count, wait_ms, _answer)
        return None

    async def commit(self, ctx: RequestContext, request: RemotingCommand
                     ) -> RemotingCommand | None:
        broker = self.broker
        topic = broker.existing(name_of(request, TOPIC))
        group = name_of(request, GROUP)
        broker.commit(topic, group, required_int(request, OFFSET, 0, MAX_OFFSET))
        return _ok()

    async def offsets(self, ctx: RequestContext, request: RemotingCommand
                      ) -> RemotingCommand | None:
        topic = self.broker.existing(name_of(request, TOPIC))
        earliest = topic.store.earliest
        start = max(earliest, optional_int(request, OFFSET, 0, MAX_OFFSET) or 0)
        response = _ok()
        response.body = orjson.dumps({
            "earliest": earliest, "end": topic.end, "groups": topic.groups,
            # what a pull from ``start`` reads up to now (a deferred message not yet due
            # holds back the ones after it): what Spark's streaming source plans to read
            "readable": topic.visible_end(trio.current_time(), start),
            # the log's id: offsets of another incarnation are another log's
            "incarnation": topic.incarnation})
        return response

    async def stats(self, ctx: RequestContext, request: RemotingCommand
                    ) -> RemotingCommand | None:
        fields = request.ext_fields or {}
        topic = None if fields.get(TOPIC) is None else name_of(request, TOPIC)
        after = None if fields.get(AFTER) is None else name_of(request, AFTER)
        limit = optional_int(request, LIMIT, 1, MAX_TOPICS_PER_PAGE)
        response = _ok()
        response.body = statistics_to_json(self.broker.statistics(topic, after=after,
                                                                  limit=limit))
        return response


_EMPTY_ANSWER: Final = RemotingCommand.create_response(ResponseCode.SUCCESS)


def _answer(body: bytes | None) -> RemotingCommand:
    """A pull's answer: the records in the body, no ext fields (each record carries its
    offset), so its header is the codec's cached template. A copy of one prototype: cheaper
    than a new response (a publish may answer thousands of held pulls at once)."""
    response = _EMPTY_ANSWER.with_opaque(0)
    response.body = body
    return response


class Subscribe(StreamProcessor):
    """A subscription: a stream of deliveries from a channel, bounded by the subscriber's
    credits, given back by its acknowledgements."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_stream(self, ctx: RequestContext, request: RemotingCommand,
                             stream: ServerStream) -> None:
        broker = self.broker
        try:
            consumer = broker.subscribe(name_of(request, TOPIC), name_of(request, CHANNEL),
                                        stream, ctx.channel, ctx.remote_addr)
        except Refusal as refusal:
            raise AbortProcessError(refusal.code, refusal.remark) from None
        try:
            await self._deliver(consumer, stream)
        finally:
            broker.remove_consumer(consumer)

    async def _deliver(self, consumer: Consumer, stream: ServerStream) -> None:
        """Send the deliveries the broker hands ``consumer``, as its credits and its
        connection's room allow (NSQ's ``messagePump``)."""
        broker = self.broker
        topic = consumer.topic
        subscriber = consumer.subscriber
        deliveries = subscriber.deliveries
        while True:
            credits = await stream.wait_credits()
            room = deliveries.room
            if not room:  # the connection holds its most: wait until some deliveries end
                await subscriber.paused.park()
                continue
            taken = broker.take(consumer, min(credits, MAX_BATCH, room), trio.current_time())
            subscriber.pass_on()  # the room left is another's turn
            if not taken:
                await topic.waiting.park()
                continue
            offsets = [offset for offset, _ in taken]
            attempts = {offset: attempt for offset, attempt in taken if attempt > 1}
            while offsets:  # a frame's worth at a time: never more than that read at once
                try:
                    covered, records = await topic.read_some(offsets, MAX_ITEM_BYTES,
                                                             broker.readers)
                except OSError as exc:  # its deliveries go back to the channel
                    broker.disk_failed("read", topic.name, exc)
                    refusal = disk_failed("subscribe", topic.name, exc)
                    raise AbortProcessError(refusal.code, refusal.remark) from None
                batch: list[bytes] = []
                retries: list[tuple[int, int]] = []
                for offset in offsets[:covered]:
                    record = records.get(offset)
                    if record is None:  # let go of meanwhile (a corrupt segment's gap)
                        broker.skip(consumer, offset)
                        continue
                    batch.append(record)
                    if attempts and offset in attempts:
                        retries.append((offset, attempts[offset]))
                del offsets[:covered]
                if batch:
                    await _send(stream, batch, retries)


async def _send(stream: ServerStream, batch: list[bytes], retries: list[tuple[int, int]]
                ) -> None:
    item = RemotingCommand.create_request(QueueCode.SUBSCRIBE, body=b"".join(batch))
    if retries:
        item.ext_fields = {ATTEMPTS: format_attempts(retries)}
    await stream.send(item, cost=len(batch))


def register_handlers(broker: Broker, server: RemotingServer | TrioRemotingServer
                      ) -> None:
    """Register the service's processors on ``server``."""
    handlers = _Handlers(broker)
    table: dict[QueueCode, Callable[[RequestContext, RemotingCommand],
                                    Awaitable[RemotingCommand | None]]] = {
        QueueCode.PUBLISH: handlers.publish,
        QueueCode.ACK: handlers.ack,
        QueueCode.PULL: handlers.pull,
        QueueCode.COMMIT: handlers.commit,
        QueueCode.OFFSETS: handlers.offsets,
        QueueCode.STATS: handlers.stats,
        QueueCode.CREATE_TOPIC: handlers.create,
    }
    for code, handle in table.items():
        server.register_processor(code, _Processor(handle))
    server.register_processor(QueueCode.SUBSCRIBE, Subscribe(broker))
