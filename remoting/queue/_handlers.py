"""The queue service's request handlers: one processor per `QueueCode`, all on the event loop.

Each reads its fields through `_wire` (a bad one is answered with the `Refusal`'s code and
remark: the connection and everything else go on) and acts on the service's topics.
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING, Final

import orjson
import trio

from codec import FLAG_ONEWAY, RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, StreamProcessor

from .._hooks import AbortProcessError
from .._log import log
from .._messaging._acks import ACK_BYTES, AckOp, unpack_acks
from .._messaging._channel_queue import Outcome
from .._messaging._codes import STREAM_ID, QueueCode
from .._messaging._credits import MAX_CREDITS
from .._messaging._dedup import KEY_OVERHEAD
from .._messaging._records import (
    FIXED_BYTES,
    RecordError,
    TooManyEntriesError,
    split_entries,
)
from ._stats import MAX_TOPICS_PER_PAGE, statistics_to_json
from ._topic import COLD
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
    from ._broker import Broker, Consumer, Subscriber
    from ._topic import Topic

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


def _too_many(kind: str, topic: str, limit: int) -> Refusal:
    return Refusal(ResponseCode.NO_PERMISSION, (
        f"topic {topic!r} has {limit} {kind}, the service's max_channels: use an existing "
        f"one, delete some (QueueService.delete_{kind[:-1]}), or raise max_channels"))


def _too_many_in_all(kind: str, limit: int) -> Refusal:
    return Refusal(ResponseCode.NO_PERMISSION, (
        f"the service has {limit} {kind} in all, its max_total_{kind}: use an existing one, "
        f"delete some (QueueService.delete_{kind[:-1]}), or raise max_total_{kind}"))


def new_channel_refusal(broker: Broker, topic: Topic, name: str) -> Refusal | None:
    """Return why ``topic`` may not have the new channel ``name`` (None: it may, or it is
    not new)."""
    if name in topic.channels:
        return None
    if len(topic.channels) >= broker.max_channels:
        return _too_many("channels", topic.name, broker.max_channels)
    if broker.channel_count >= broker.max_total_channels:
        return _too_many_in_all("channels", broker.max_total_channels)
    return None


def _full(topic: Topic, size: int) -> Refusal:
    """A publish of ``size`` bytes of records that ``topic`` (no data directory) has no room
    for: its own bounds, or the service's total."""
    store = topic.store
    budget = store.budget
    if not budget.fits(size):
        return Refusal(ResponseCode.SYSTEM_BUSY, (
            f"the service is full: its topics hold {budget.used} bytes of messages in memory, "
            f"and its total_memory_bytes is {budget.limit} ({size} more asked for topic "
            f"{topic.name!r}); consume them, raise total_memory_bytes, or run the service "
            "with a data_dir"))
    return Refusal(ResponseCode.SYSTEM_BUSY, (
        f"topic {topic.name!r} is full: it holds {store.retained} messages of "
        f"{store.memory_size} bytes, and memory_messages is {store.memory_messages}, "
        f"memory_bytes {store.memory_bytes}; consume them, or run the service with a "
        "data_dir"))


def _no_topic(name: str) -> Refusal:
    return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic {name!r} does not exist: publish to "
                   "it, or create it (create_topic), first")


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
    """The handlers of one service."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def made(self, name: str) -> Topic:
        """Return the topic ``name``, made if new and the service may hold one more."""
        broker = self.broker
        topic = broker.topic(name)
        if topic is None:
            if len(broker.topics) >= broker.max_topics:
                raise Refusal(ResponseCode.NO_PERMISSION, (
                    f"topic {name!r} is new and the service holds {broker.max_topics} topics, "
                    "its max_topics: use an existing topic, or raise max_topics"))
            topic = broker.create_topic(name)
        return topic

    def existing(self, request: RemotingCommand) -> Topic:
        name = name_of(request, TOPIC)
        topic = self.broker.topic(name)
        if topic is None:
            raise _no_topic(name)
        return topic

    # ------------------------------------------------------------------ publishing

    async def publish(self, ctx: RequestContext, request: RemotingCommand
                      ) -> RemotingCommand | None:
        broker = self.broker
        name = name_of(request, TOPIC)
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
        if defer_ms and broker.deferred_room() < len(contents):
            raise Refusal(ResponseCode.SYSTEM_BUSY, (
                f"the service holds {broker.max_deferred} deferred messages not yet due "
                "(its max_deferred) already: publish these later, or without defer"))
        topic = self.made(name)
        now = trio.current_time()
        if key is not None:
            seen = topic.keys.get(key, now)
            if seen is not None:
                topic.duplicates += 1
                return _ok(**{OFFSET: seen[0], COUNT: seen[1], DUPLICATE: "true"})
        store = topic.store
        size = sum(map(len, contents)) + FIXED_BYTES * len(contents)  # as records
        if key is not None:  # and its key, remembered for the window
            size += len(key) + KEY_OVERHEAD
        if not store.has_room(len(contents), size):
            topic.trim()
            if not store.budget.fits(size):  # the service's total: what others let go of
                broker.trim_changed()
            if not store.has_room(len(contents), size):
                raise _full(topic, size)
        try:
            first = topic.append(contents, now, int(time.time() * 1000), defer_ms / 1000, key)
        except OSError as exc:  # nothing of it was kept (`SegmentLog.append`)
            broker.disk_failed("append", name, exc)
            raise Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, (
                f"the service could not write topic {name!r} to its data directory "
                f"({exc.strerror or exc}): nothing of this publish was kept; retry once "
                "its disk has room")) from None
        broker.disk_ok("append", name)
        broker.written(topic)
        if defer_ms or key is not None:  # a message coming due, a key to forget
            broker.schedule(topic, topic.next_due())
        if broker.retention is not None:
            broker.schedule_retention(topic, now)
        if not defer_ms:  # after this answer is on its way (RocketMQ notifies from another
            # thread): the pulls held at its first offset, no other
            trio.lowlevel.current_trio_token().run_sync_soon(broker.wake_pulls, topic, first)
        if broker.fsync == "always":
            try:
                await broker.sync()
            except OSError as exc:  # RocketMQ answers a failed synchronous flush so too
                broker.disk_failed("fsync", name, exc)
                raise Refusal(ResponseCode.FLUSH_DISK_TIMEOUT, (
                    f"the messages were appended to topic {name!r} (offsets {first} to "
                    f"{first + len(contents) - 1}) and will be delivered, but their fsync "
                    f"failed ({exc.strerror or exc}): they may not survive a crash of the "
                    "machine")) from None
        return _ok(**{OFFSET: first, COUNT: len(contents)})

    async def create(self, ctx: RequestContext, request: RemotingCommand
                     ) -> RemotingCommand | None:
        topic = self.made(name_of(request, TOPIC))
        return _ok(**{END: topic.end})

    # ------------------------------------------------------------------ acknowledging

    async def ack(self, ctx: RequestContext, request: RemotingCommand
                  ) -> RemotingCommand | None:
        broker = self.broker
        stream_id = required_int(request, STREAM_ID, -(2**31), 2**31 - 1)
        consumer = broker.by_stream.get((ctx.channel, stream_id))
        if consumer is None:
            raise Refusal(ResponseCode.SUBSCRIPTION_NOT_EXIST, (
                f"no subscription {stream_id} on this connection: it ended, and its "
                "deliveries went back to the channel"))
        packed = request.body or b""
        if len(packed) > MAX_ACKS * ACK_BYTES:  # a subscriber never holds more deliveries
            raise Refusal(ResponseCode.INVALID_PARAMETER, (
                f"an ACK carries at most {MAX_ACKS} acknowledgements (a subscription's most "
                f"credits), got {len(packed) // ACK_BYTES}: send them in several"))
        try:
            acks = unpack_acks(packed)
        except ValueError as exc:
            raise Refusal(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        refused = self._apply(consumer, acks, trio.current_time())
        body = None
        if refused:
            topic, channel = consumer.topic.name, consumer.channel.name
            broker.acks_refused[topic, channel] = (
                broker.acks_refused.get((topic, channel), 0) + len(refused))
            body = b"".join(_U64.pack(offset) for offset in refused)
        if request.flag & FLAG_ONEWAY:  # no answer: the refusals go back on the stream
            if body is not None:
                notice = RemotingCommand.create_request(QueueCode.ACK, body=body)
                notice.ext_fields = {REFUSED: str(len(refused))}
                consumer.stream.send_nowait(notice, cost=0)
            return None
        response = _ok(**{REFUSED: len(refused)})
        response.body = body
        return response

    def _apply(self, consumer: Consumer, acks: list[tuple[AckOp, int, int]], now: float
               ) -> list[int]:
        broker = self.broker
        queue = consumer.channel.queue
        cid = consumer.id
        if all(op is AckOp.FINISH for op, _, _ in acks):  # the usual group: finishes only
            refused = [offset for offset, _ in queue.finish_many(
                [offset for _, offset, _ in acks], cid)]
            if len(refused) < len(acks):
                consumer.ended(len(acks) - len(refused))
                broker.changed(consumer.topic)
            return refused
        returned = 0
        refused = []
        requeued = False
        for op, offset, delay_ms in acks:
            if op is AckOp.FINISH:
                outcome = queue.finish(offset, cid)
            elif op is AckOp.REQUEUE:
                entry = queue.in_flight.entries.get(offset)
                outcome = queue.requeue(offset, cid, delay_ms / 1000, now)
                if outcome is Outcome.DONE:
                    requeued = True
                    if delay_ms:
                        broker.schedule_channel(consumer.channel)
                elif outcome is Outcome.DEAD and entry is not None:
                    broker.dead(consumer.topic, consumer.channel, offset, entry.attempts)
            else:
                outcome = queue.touch(offset, cid, now)
            if outcome is Outcome.UNKNOWN or outcome is Outcome.FOREIGN:
                refused.append(offset)
            elif op is not AckOp.TOUCH:
                returned += 1
        if returned:
            consumer.ended(returned)
            broker.changed(consumer.topic)
        if requeued:
            consumer.topic.waiting.unpark_all()
        return refused

    # ------------------------------------------------------------------ pulling

    async def pull(self, ctx: RequestContext, request: RemotingCommand
                   ) -> RemotingCommand | None:
        topic = self.existing(request)
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
        if incarnation is not None and incarnation != topic.incarnation:
            raise Refusal(ResponseCode.PULL_OFFSET_MOVED, (
                f"topic {topic.name!r} is another log now (incarnation {topic.incarnation}, "
                f"not {incarnation[:64]}): the service started it afresh, so the offsets "
                "read from the old one do not name its messages; read its offsets again"))
        if start > topic.end:
            raise Refusal(ResponseCode.INVALID_PARAMETER,
                          f"offset {start} is past the end of topic {topic.name!r} "
                          f"({topic.end})")
        broker = self.broker
        try:
            body = await topic.pull_body_async(start, count, trio.current_time(),
                                               broker.readers)
        except OSError as exc:
            broker.disk_failed("read", topic.name, exc)
            raise Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, (
                f"the service could not read topic {topic.name!r} from its data directory "
                f"({exc.strerror or exc}); retry later")) from None
        if body is not None or not wait_ms:
            return _answer(body)

        if len(broker.holds) >= broker.max_held_pulls:
            broker.pulls_refused += 1
            refused = broker.pulls_refused
            if refused & (refused - 1) == 0:  # 1, 2, 4, 8...: peers cannot flood the log
                log.warning("queue.pulls_refused", held=broker.max_held_pulls,
                            refused=refused, peer=ctx.remote_addr)
            raise Refusal(ResponseCode.POLLING_FULL, (
                f"the service holds {broker.max_held_pulls} pulls already, its "
                "max_held_pulls: pull again later (or with max_wait=0)"))

        def wake(ctx: RequestContext, request: RemotingCommand, expired: bool
                 ) -> RemotingCommand | None:
            if not expired:
                broker.pulls_woken += 1
            body = topic.pull_body(start, count, trio.current_time())
            if body is COLD:  # rare: the records woken for need the disk
                if expired:
                    return _answer(None)  # an empty answer: the next pull reads them
                broker.prefetch(topic, start, count)  # then wakes the pulls held here again
                broker.pulls_rewaited += 1
                return None
            if body is None and not expired:
                broker.pulls_rewaited += 1
                topic.held_at.add(max(start, topic.store.earliest))  # still waits there
                return None
            return _answer(body)  # type: ignore[arg-type]

        # held where it reads from (the earliest held, if its offset was let go): a publish
        # there, or that deferred message coming due, wakes it (`Broker.wake_pulls`), and
        # nothing else does
        waits_at = max(start, topic.store.earliest)
        topic.held_at.add(waits_at)
        broker.holds.hold(ctx, request, key=(topic.name, waits_at), timeout=wait_ms / 1000,
                          wake=wake)
        return None

    async def commit(self, ctx: RequestContext, request: RemotingCommand
                     ) -> RemotingCommand | None:
        topic = self.existing(request)
        group = name_of(request, GROUP)
        offset = required_int(request, OFFSET, 0, MAX_OFFSET)
        if offset > topic.end:
            raise Refusal(ResponseCode.INVALID_PARAMETER,
                          f"offset {offset} is past the end of topic {topic.name!r} "
                          f"({topic.end}): commit the next offset to read")
        broker = self.broker
        if group not in topic.groups:
            if len(topic.groups) >= broker.max_channels:
                raise _too_many("groups", topic.name, broker.max_channels)
            if broker.group_count >= broker.max_total_groups:
                raise _too_many_in_all("groups", broker.max_total_groups)
        broker.commit(topic, group, offset)
        return _ok()

    # ------------------------------------------------------------------ asking

    async def offsets(self, ctx: RequestContext, request: RemotingCommand
                      ) -> RemotingCommand | None:
        topic = self.existing(request)
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
            name = name_of(request, TOPIC)
            channel_name = name_of(request, CHANNEL)
        except Refusal as refusal:
            raise AbortProcessError(refusal.code, refusal.remark) from None
        topic = broker.topic(name)
        if topic is None:
            missing = _no_topic(name)
            raise AbortProcessError(missing.code, missing.remark)
        too_many = new_channel_refusal(broker, topic, channel_name)
        if too_many is not None:
            raise AbortProcessError(too_many.code, too_many.remark)
        channel = broker.add_channel(topic, channel_name)
        consumer = broker.add_consumer(topic, channel, stream, ctx.channel, ctx.remote_addr)
        try:
            await self._deliver(consumer, stream)
        finally:
            broker.remove_consumer(consumer)

    async def _deliver(self, consumer: Consumer, stream: ServerStream) -> None:
        broker = self.broker
        topic = consumer.topic
        queue = consumer.channel.queue
        subscriber = consumer.subscriber
        deliveries = subscriber.deliveries
        while True:
            credits = await stream.wait_credits()
            room = deliveries.room
            if not room:  # the connection holds its most: wait until some deliveries end
                await subscriber.paused.park()
                continue
            now = trio.current_time()
            taken = queue.take(consumer.id, min(credits, MAX_BATCH, room), now, topic.end,
                               topic.deferred)
            if not taken:
                subscriber.pass_on()  # the room this one was woken for is another's turn
                await topic.waiting.park()
                continue
            if deliveries.taken(len(taken)):
                self._reached_bound(subscriber)
            subscriber.pass_on()
            broker.schedule(consumer.channel, now + queue.msg_timeout)
            offsets = [offset for offset, _ in taken]
            attempts = {offset: attempt for offset, attempt in taken if attempt > 1}
            while offsets:  # a frame's worth at a time: never more than that read at once
                try:
                    covered, records = await topic.read_some(offsets, MAX_ITEM_BYTES,
                                                             broker.readers)
                except OSError as exc:  # its deliveries go back to the channel
                    broker.disk_failed("read", topic.name, exc)
                    raise AbortProcessError(ResponseCode.SERVICE_NOT_AVAILABLE, (
                        f"the service could not read topic {topic.name!r} from its data "
                        f"directory ({exc.strerror or exc}): subscribe again later")) from None
                batch: list[bytes] = []
                retries: list[tuple[int, int]] = []
                for offset in offsets[:covered]:
                    record = records.get(offset)
                    if record is None:  # let go of meanwhile (a corrupt segment's gap)
                        if queue.skip(offset, consumer.id):
                            subscriber.ended(1)
                        continue
                    batch.append(record)
                    if attempts and offset in attempts:
                        retries.append((offset, attempts[offset]))
                del offsets[:covered]
                if batch:
                    await _send(stream, batch, retries)


    def _reached_bound(self, subscriber: Subscriber) -> None:
        broker = self.broker
        broker.times_at_bound += 1
        times = subscriber.deliveries.times_at_bound
        if times & (times - 1) == 0:  # 1, 2, 4, 8...: a peer cannot flood the log
            log.warning("queue.deliveries_paused", peer=subscriber.peer,
                        in_flight=subscriber.deliveries.limit, paused_on_connection=times)


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
