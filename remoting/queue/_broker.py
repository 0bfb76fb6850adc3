"""`Broker`: the queue service's topics, channels, groups and subscriptions, and what changes
them (NSQ's model with RocketMQ's offsets), in one process.

Theory of operation:
- Everything the service holds is owned by the server's loop thread: its processors
  (`_handlers`) are async and run there, as does its background task (attached with the
  server's endpoint): the in-flight deadlines, deferred messages, keys to forget and idle
  channels (`_timer`), retention, offsets and fsync (`_housekeeping`). Appends are
  synchronous on the loop (one write to the page cache); reads on the loop take only what the
  page cache holds, the rest is read in a worker thread (`TopicStore.read_async`); fsync runs
  in a worker thread, one file at a time (`fsync_paths`).
- A publish is acknowledged once its records are in the topic's store: in memory, and, with
  a data directory, written to the topic's segment file (the kernel holds them: they survive
  the process). ``fsync`` says when they reach the disk: ``"always"`` before the
  acknowledgement (publishes arriving meanwhile share one fsync, `SyncRound`, and its
  failure; the retry of a keyed publish is answered once the first's records are on it),
  ``"interval"`` every ``fsync_interval`` seconds, ``"never"`` when the kernel decides.
- Subscriptions are credit-based streams: a subscriber's credits bound the deliveries it
  holds (NSQ's RDY); its acknowledgements give them back (`Consumer`). A connection's
  subscriptions together hold at most ``max_in_flight_per_connection`` (`Subscriber`, NSQ's
  ``--max-rdy-count``): at it, they pause (parked) until some of its deliveries end.
- Pulls with nothing to read are held (`HeldRequests`, keyed by topic and the offset they
  wait at) and woken by a publish at that offset, or by that deferred message coming due: a
  publish wakes only the pulls it answers, after its own answer is on its way, through the
  waker task (`_wake_held_pulls`, parked until a publish finds pulls held on its topic: no
  hop through the loop's wake-up socket). At most ``max_held_pulls`` are held in all.
- Nothing runs over every topic or channel on a clock. The timer sleeps until the first
  deadline of one `DeadlineHeap` (a channel's next delivery deadline, message coming due or
  idle end; a topic's next deferred message or key to forget; its retention), and visits
  only what is due. Housekeeping (each second) visits the topics that changed since
  (``_dirty``): their retention, trimming and offsets.
- Channels and groups are bounded per topic (``max_channels``) and in all
  (``max_total_channels``, ``max_total_groups``); with ``channel_idle_timeout``, a channel
  without subscribers for that long is deleted (NSQ deletes an ephemeral channel when its
  last client leaves). Messages in memory are bounded in all (``total_memory_bytes``, a
  `MemoryBudget`): without a data directory a publish past it is refused; with one, the
  caches of the topics written least recently give memory back.
- With a data directory, every topic's records, group offsets and channel positions are
  recovered when the broker is made; what recovery found wrong is in ``problems`` (and
  logged), the rest is served.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import time
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Final

import orjson
import trio

from .._core._receiving._held import HeldRequests
from .._core._sansio._deadlines import DeadlineHeap
from .._log import log
from .._messaging._credits import MAX_CREDITS
from ._messages import Message
from ._refusals import (
    disk_failed,
    fsync_failed,
    full,
    moved,
    no_subscription,
    no_topic,
    past_end,
    too_many,
    too_many_deferred,
    too_many_in_all,
    too_many_pulls,
    too_many_topics,
)
from ._sansio._acks import AckOp
from ._sansio._channel_queue import Outcome
from ._sansio._connection_deliveries import ConnectionDeliveries
from ._sansio._dedup import KEY_OVERHEAD
from ._sansio._records import FIXED_BYTES, record_fields
from ._segments import SegmentLog, fsync_paths
from ._stats import (
    MAX_PROBLEMS_SHOWN,
    ChannelStatistics,
    GroupStatistics,
    QueueStatistics,
    TopicStatistics,
)
from ._store import MemoryBudget, TopicStore
from ._topic import COLD, Channel, Topic
from ._wire import is_name

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from codec import RemotingCommand
    from processors import RequestContext, ServerStream

    from ._segments import Problem
    from ._settings import QueueSettings

__all__ = ["Broker", "Consumer", "Subscriber"]

HOUSEKEEPING_SECONDS: Final = 1.0  # retention, key expiry, offsets to disk (and fsync)
INCARNATION_FILE: Final = "incarnation"
READ_THREADS: Final = 4  # segment reads that wait for the disk at once, in worker threads
# Topics whose newest segment is kept open for appending, at most: the least recently written
# are closed past it (reopened by their next publish), so many topics cannot run the process
# out of file descriptors (often 1,024 at most).
MAX_OPEN_APPENDS: Final = 256
OFFSETS_FILE: Final = "offsets.json"


class Subscriber:
    """One connection that subscribes: its deliveries in flight against the service's bound
    (`ConnectionDeliveries`), and its subscriptions paused at that bound.

    Paused subscriptions are woken one at a time (a baton): when deliveries end with room
    left, one wakes; having taken what it could, it wakes the next if room is left. A
    connection acknowledging one delivery at a time so wakes one task per acknowledgement,
    not all of its (up to 1,024) subscriptions.
    """

    __slots__ = ("deliveries", "paused", "peer", "subscriptions")

    def __init__(self, limit: int, peer: str) -> None:
        self.deliveries = ConnectionDeliveries(limit)
        self.paused = trio.lowlevel.ParkingLot()
        self.peer = peer
        self.subscriptions = 0

    def ended(self, count: int) -> None:
        """``count`` of the connection's deliveries ended: wake a paused subscription if
        there is room now."""
        self.deliveries.ended(count)
        self.pass_on()

    def pass_on(self) -> None:
        """Wake one paused subscription if the connection has room for it."""
        if self.paused and self.deliveries.room > 0:
            self.paused.unpark()


class SyncRound:
    """One fsync of the topics' written files (a group commit): ``done`` is set once it
    ended, with ``error`` if it failed, for every publish waiting on it."""

    __slots__ = ("done", "error", "generation")

    def __init__(self, generation: int) -> None:
        self.generation = generation  # counts the rounds started since the broker was made
        self.done = trio.Event()
        self.error: OSError | None = None

    def raise_failure(self) -> None:
        """Raise (a copy of) the error it failed with, if it failed."""
        if self.error is not None:
            raise OSError(self.error.errno, self.error.strerror, self.error.filename)


class Consumer:
    """One subscription: which channel it reads, the stream it is sent on, and its
    connection's `Subscriber`."""

    __slots__ = ("channel", "id", "key", "stream", "subscriber", "topic")

    def __init__(self, consumer_id: int, topic: Topic, channel: Channel,
                 stream: ServerStream, key: tuple[object, int],
                 subscriber: Subscriber) -> None:
        self.id = consumer_id
        self.topic = topic
        self.channel = channel
        self.stream = stream
        self.key = key  # (the connection's channel handle, the stream's id)
        self.subscriber = subscriber

    def ended(self, count: int) -> None:
        """``count`` of its deliveries ended (finished, requeued, timed out): give their
        credits back, and their room on the connection."""
        self.give_back(count)
        self.subscriber.ended(count)

    def give_back(self, credits: int) -> None:
        """Give ``credits`` back (deliveries ended), never past `MAX_CREDITS` available: a
        subscriber that granted itself more with CREDIT frames keeps a full window, and the
        extra credits are dropped instead of failing the caller (the timer task, or an
        acknowledgement half applied)."""
        room = MAX_CREDITS - self.stream.credits
        if credits > room:
            credits = room
        if credits > 0:
            self.stream.add_credits(credits)


class Broker:
    """The queue's state and what changes it, owned by its server's event loop (see the module
    docstring); `QueueService` is its public face."""

    def __init__(self, settings: QueueSettings,
                 dead_letter: Callable[[str, Message], object] | None = None) -> None:
        self.settings = settings
        self.dead_letter = dead_letter
        self.budget = MemoryBudget(settings.total_memory_bytes)
        self.topics: dict[str, Topic] = {}
        self.channel_count = 0  # channels of all topics
        self.group_count = 0  # groups of all topics
        self.problems: list[Problem] = []
        self.holds = HeldRequests()
        self.pulls_woken = 0  # held pulls woken by a publish or a deferred message coming due
        self.pulls_rewaited = 0  # ...of which held again: what they wait for was not there
        self.pulls_refused = 0  # answered POLLING_FULL: max_held_pulls were held
        self.channels_expired = 0  # deleted after channel_idle_timeout without subscribers
        # the service's timers: each channel's and topic's timer key -> the channel or topic
        self.timers = DeadlineHeap()
        self._timed: dict[int, Channel | Topic] = {}
        self._dirty: set[str] = set()  # topics changed since housekeeping last ran
        self._untrimmed: set[str] = set()  # ...and since `trim_changed` last ran
        self._names: list[str] = []  # the topics' names, sorted: pages of statistics
        # topics holding messages in memory with a data directory, least recently written
        # first: the first to give memory back when the service is past its total
        self._cached: OrderedDict[str, Topic] = OrderedDict()
        self._incarnations_unsaved: set[str] = set()  # kept in memory: the disk failed
        # worker threads reading segment data the page cache does not hold, at once
        self.readers = trio.CapacityLimiter(READ_THREADS)
        self._nursery: trio.Nursery | None = None  # the background task's, while it runs
        # publishes whose held pulls the waker task wakes next (`wake_pulls_soon`)
        self._wakes: list[tuple[Topic, int]] = []
        self._waker = trio.lowlevel.ParkingLot()
        self._prefetching: set[tuple[str, int, int]] = set()
        self.prefetches = 0  # held pulls woken for records not in the page cache
        # topics with an open append descriptor, the least recently written first
        self._appending: OrderedDict[str, SegmentLog] = OrderedDict()
        self.consumers: dict[int, Consumer] = {}
        self.by_stream: dict[tuple[object, int], Consumer] = {}
        # connections with a subscription open, by their channel handle
        self.subscribers: dict[object, Subscriber] = {}
        self.times_at_bound = 0  # a connection's deliveries reached the bound, since start
        self.acks_refused: dict[tuple[str, str], int] = {}
        self._ids = itertools.count(1)
        self._timer_scope: trio.CancelScope | None = None
        self._offsets_saved: dict[str, bytes] = {}
        # what recovery found on the wall clock, put on the loop's clock when it runs
        self._deferred_wall: dict[str, list[tuple[int, int]]] = {}
        self._keys_wall: dict[str, list[tuple[str, int, int, int]]] = {}
        self._sync_started = 0  # group commits started since the broker was made
        self._sync_round: SyncRound | None = None  # the one running now
        self._closed = False
        # what fails on disk now, by (operation, topic): reported in statistics' problems
        self._disk_failing: dict[tuple[str, str | None], str] = {}
        if self.settings.data_dir is not None:
            self._recover(self.settings.data_dir)

    # ------------------------------------------------------------------ topics

    def topic(self, name: str) -> Topic | None:
        """Return the topic ``name`` if it exists (loop thread)."""
        return self.topics.get(name)

    def create_topic(self, name: str) -> Topic:
        """Return the topic ``name``, made (and its directory) if new (loop thread)."""
        found = self.topics.get(name)
        if found is None:
            log_ = None if self.settings.data_dir is None else SegmentLog(
                self.settings.data_dir / "topics" / name, self.settings.segment_bytes)
            found = self.topics[name] = self._topic(name, log_)
            bisect.insort(self._names, name)
        return found

    def _topic(self, name: str, segments: SegmentLog | None) -> Topic:
        settings = self.settings
        store = TopicStore(settings.memory_messages, segments, settings.memory_bytes,
                           self.budget)
        return Topic(name, store, msg_timeout=settings.msg_timeout,
                     max_attempts=settings.max_attempts, dedup_window=settings.dedup_window,
                     incarnation=self._incarnation(name))

    def _incarnation(self, name: str) -> str | None:
        """Return the id of topic ``name``'s log: the one its directory keeps, or a new one
        (kept there; in memory only while the disk refuses it, saved again each second)."""
        if self.settings.data_dir is None:
            return None  # made by the topic: a new log each time the service starts
        path = self.settings.data_dir / "topics" / name / INCARNATION_FILE
        try:
            kept = path.read_text().strip()
        except FileNotFoundError:
            kept = ""
        except (OSError, UnicodeDecodeError) as exc:
            log.error("queue.incarnation_unreadable", file=str(path), error=str(exc))
            kept = ""
        if len(kept) == 32 and all(c in "0123456789abcdef" for c in kept):
            return kept
        made = uuid.uuid4().hex
        self._incarnations_unsaved.add(name)
        self._save_incarnation(name, made)
        return made

    def _save_incarnation(self, name: str, incarnation: str) -> None:
        assert self.settings.data_dir is not None
        path = self.settings.data_dir / "topics" / name / INCARNATION_FILE
        temporary = path.with_name(INCARNATION_FILE + ".tmp")
        try:
            temporary.write_text(incarnation + "\n")
            os.replace(temporary, path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            self.disk_failed("save_incarnation", name, exc)
            return
        self.disk_ok("save_incarnation", name)
        self._incarnations_unsaved.discard(name)

    def changed(self, topic: Topic) -> None:
        """Note that ``topic``'s offsets, channels or groups changed: housekeeping visits
        it (its retention, trimming and offsets) at its next run."""
        self._dirty.add(topic.name)
        self._untrimmed.add(topic.name)

    def _recover(self, data_dir: Path) -> None:
        root = data_dir / "topics"
        root.mkdir(parents=True, exist_ok=True)
        now_ms = int(time.time() * 1000)
        for directory in sorted(p for p in root.iterdir() if p.is_dir()):
            if not is_name(directory.name):  # not made by the service: no client can name it
                log.warning("queue.file_ignored", file=str(directory),
                            reason="not a topic name")
                continue
            segments = SegmentLog(directory, self.settings.segment_bytes)
            for path in segments.recovered.ignored:
                log.warning("queue.file_ignored", file=str(path),
                            reason="not named as a segment (20 digits and .log)")
            topic = self.topics[directory.name] = self._topic(directory.name, segments)
            bisect.insort(self._names, directory.name)
            recovered = segments.recovered
            for problem in recovered.problems:
                self.problems.append(problem)
                if problem.kind == "corrupt":
                    log.error("queue.segment_corrupt", topic=directory.name,
                              file=str(problem.path), position=problem.position,
                              reason=problem.reason, set_aside=str(problem.set_aside),
                              kept=problem.kept)
                else:
                    log.warning("queue.segment_truncated", topic=directory.name,
                                file=str(problem.path), position=problem.position,
                                reason=problem.reason, kept=problem.kept)
            window_ms = self.settings.dedup_window * 1000
            self._keys_wall[directory.name] = [
                item for item in recovered.keys if now_ms - item[3] <= window_ms]
            self._deferred_wall[directory.name] = [
                (offset, at) for offset, at in recovered.deferred if at > now_ms]
            self._load_offsets(topic, directory / OFFSETS_FILE)
        if self.topics:
            log.info("queue.recovered", topics=len(self.topics), problems=len(self.problems))

    def _load_offsets(self, topic: Topic, path: Path) -> None:
        if not path.exists():
            return
        try:
            saved = orjson.loads(path.read_bytes())
            entries = {kind: dict(saved.get(kind, {})) for kind in ("groups", "channels")}
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as exc:
            log.error("queue.offsets_unreadable", file=str(path), error=str(exc))
            return
        # what a client could not have committed is dropped: a name no request can carry, an
        # offset that is not an int from 0 (one past the end is the end: the log was cut)
        dropped = 0
        for kind, found in entries.items():
            for name, offset in found.items():
                if not is_name(name) or type(offset) is not int or not 0 <= offset <= 2**63 - 1:
                    dropped += 1
                elif kind == "groups":
                    self.group_count += name not in topic.groups
                    topic.groups[name] = min(offset, topic.end)
                else:
                    self.channel_count += name not in topic.channels
                    topic.channel(name, offset)
        if dropped:
            log.warning("queue.offsets_dropped", file=str(path), dropped=dropped)
        self._offsets_saved[topic.name] = path.read_bytes()

    # ------------------------------------------------------------------ requests

    def topic_to_write(self, name: str) -> Topic:
        """Return the topic ``name``, made if new (a publish, CREATE_TOPIC).

        Raises:
            Refusal: it is new, and the service holds ``max_topics``.
        """
        topic = self.topics.get(name)
        if topic is None:
            if len(self.topics) >= self.settings.max_topics:
                raise too_many_topics(name, self.settings.max_topics)
            topic = self.create_topic(name)
        return topic

    def existing(self, name: str) -> Topic:
        """Return the topic ``name``.

        Raises:
            Refusal: it does not exist.
        """
        topic = self.topics.get(name)
        if topic is None:
            raise no_topic(name)
        return topic

    async def publish(self, name: str, contents: list[bytes], key: str | None,
                      defer_ms: int) -> tuple[int, int, bool]:
        """Append ``contents`` to topic ``name`` (made if new) as one publish; return its
        first offset, its count, and whether ``key`` was seen within the dedup window (then
        nothing is appended: the offsets are the first publish's). With ``fsync="always"``
        it returns once they are on the disk.

        Raises:
            Refusal: a new topic past ``max_topics``; no room (a topic without a data
                directory, or the service's memory total); the disk failed (nothing kept),
                or its fsync (kept); a deferred publish past ``max_deferred``.
        """
        if defer_ms and self.deferred_room() < len(contents):
            raise too_many_deferred(self.settings.max_deferred)
        topic = self.topic_to_write(name)
        now = trio.current_time()
        if key is not None:
            seen = topic.keys.get(key, now)
            if seen is not None:
                topic.duplicates += 1
                # the first may still wait for its fsync: answer once it is on the disk
                await self._durable(name, seen[0], seen[1])
                return seen[0], seen[1], True
        store = topic.store
        size = sum(map(len, contents)) + FIXED_BYTES * len(contents)  # as records
        if key is not None:  # and its key, remembered for the window
            size += len(key) + KEY_OVERHEAD
        if not store.has_room(len(contents), size):
            topic.trim()
            if not store.budget.fits(size):  # the service's total: what others let go of
                self.trim_changed()
            if not store.has_room(len(contents), size):
                raise full(topic, size)
        try:
            first = topic.append(contents, now, int(time.time() * 1000), defer_ms / 1000, key)
        except OSError as exc:  # nothing of it was kept (`SegmentLog.append`)
            self.disk_failed("append", name, exc)
            raise disk_failed("write", name, exc) from None
        self.disk_ok("append", name)
        self.written(topic)
        if defer_ms or key is not None:  # a message coming due, a key to forget
            self.schedule(topic, topic.next_due())
        if self.settings.retention is not None:
            self.schedule_retention(topic, now)
        if not defer_ms:  # the pulls held at its first offset, no other, once this
            # answer is on its way
            self.wake_pulls_soon(topic, first)
        await self._durable(name, first, len(contents))
        return first, len(contents), False

    async def _durable(self, name: str, first: int, count: int) -> None:
        """With ``fsync="always"``, return once the messages at ``first`` (``count`` of
        them) in topic ``name`` are on the disk.

        Raises:
            Refusal: their fsync failed (they were kept).
        """
        if self.settings.fsync != "always":
            return
        try:
            await self.sync()
        except OSError as exc:
            self.disk_failed("fsync", name, exc)
            raise fsync_failed(name, first, count, exc) from None

    def subscription(self, handle: object, stream_id: int) -> Consumer:
        """Return the subscription on stream ``stream_id`` of the connection ``handle``.

        Raises:
            Refusal: there is none (it ended: its deliveries went back to the channel).
        """
        consumer = self.by_stream.get((handle, stream_id))
        if consumer is None:
            raise no_subscription(stream_id)
        return consumer

    def settle(self, consumer: Consumer, acks: list[tuple[AckOp, int, int]], now: float
               ) -> list[int]:
        """Apply a subscriber's acknowledgements (finish, requeue after a delay, touch: NSQ's
        FIN, REQ and TOUCH) of its deliveries; return the offsets refused (not its delivery
        now: it timed out and went to another subscriber, or was settled already), counted
        for the channel's statistics. What ended gives its credits back; a requeue past
        ``max_attempts`` is dead-lettered."""
        queue = consumer.channel.queue
        cid = consumer.id
        if all(op is AckOp.FINISH for op, _, _ in acks):  # the usual group: finishes only
            refused = [offset for offset, _ in queue.finish_many(
                [offset for _, offset, _ in acks], cid)]
            returned = len(acks) - len(refused)
            requeued = False
        else:
            refused, returned, requeued = self._settle_each(consumer, acks, now)
        if returned:
            consumer.ended(returned)
            self.changed(consumer.topic)
        if requeued:
            consumer.topic.waiting.unpark_all()
        if refused:
            key = (consumer.topic.name, consumer.channel.name)
            self.acks_refused[key] = self.acks_refused.get(key, 0) + len(refused)
        return refused

    def _settle_each(self, consumer: Consumer, acks: list[tuple[AckOp, int, int]],
                     now: float) -> tuple[list[int], int, bool]:
        """`settle` one by one: return the offsets refused, how many deliveries ended, and
        whether one went back to the channel."""
        queue = consumer.channel.queue
        cid = consumer.id
        returned = 0
        refused = []
        requeued = False
        for op, offset, delay_ms in acks:
            if op is AckOp.FINISH:
                outcome = queue.finish(offset, cid)
            elif op is AckOp.REQUEUE:
                attempts = queue.attempts(offset)  # for the dead letter, if it is one now
                outcome = queue.requeue(offset, cid, delay_ms / 1000, now)
                if outcome is Outcome.DONE:
                    requeued = True
                    if delay_ms:
                        self.schedule_channel(consumer.channel)
                elif outcome is Outcome.DEAD:
                    self.dead(consumer.topic, consumer.channel, offset, attempts)
            else:
                outcome = queue.touch(offset, cid, now)
            if outcome is Outcome.UNKNOWN or outcome is Outcome.FOREIGN:
                refused.append(offset)
            elif op is not AckOp.TOUCH:
                returned += 1
        return refused, returned, requeued

    async def pull(self, topic: Topic, start: int, count: int, incarnation: str | None
                   ) -> bytes | None:
        """Return the records of ``topic`` from ``start`` (up to ``count``), None if there
        is none to read yet; with ``incarnation``, only from that log.

        Raises:
            Refusal: ``topic`` is another log than ``incarnation``, ``start`` is past its
                end, or the disk failed.
        """
        if incarnation is not None and incarnation != topic.incarnation:
            raise moved(topic, incarnation)
        if start > topic.end:
            raise past_end(start, topic)
        try:
            return await topic.pull_body_async(start, count, trio.current_time(),
                                               self.readers)
        except OSError as exc:
            self.disk_failed("read", topic.name, exc)
            raise disk_failed("read", topic.name, exc) from None

    def hold_pull(self, ctx: RequestContext, request: RemotingCommand, topic: Topic,
                  start: int, count: int, wait_ms: int,
                  answer: Callable[[bytes | None], RemotingCommand]) -> None:
        """Hold a pull with nothing to read yet for up to ``wait_ms``: a publish at the
        offset it waits at, or that deferred message coming due, wakes it, and nothing
        else does; it is answered with ``answer(records)`` (None: none, at its deadline).

        Raises:
            Refusal: the service holds ``max_held_pulls`` already (POLLING_FULL).
        """
        limit = self.settings.max_held_pulls
        if len(self.holds) >= limit:
            self.pulls_refused += 1
            refused = self.pulls_refused
            if refused & (refused - 1) == 0:  # 1, 2, 4, 8...: peers cannot flood the log
                log.warning("queue.pulls_refused", held=limit, refused=refused,
                            peer=ctx.remote_addr)
            raise too_many_pulls(limit)

        def wake(ctx: RequestContext, request: RemotingCommand, expired: bool
                 ) -> RemotingCommand | None:
            if not expired:
                self.pulls_woken += 1
            body = topic.pull_body(start, count, trio.current_time())
            if body is COLD:  # rare: the records woken for need the disk
                if expired:
                    return answer(None)  # an empty answer: the next pull reads them
                self.prefetch(topic, start, count)  # then wakes the pulls held here again
                self.pulls_rewaited += 1
                return None
            if body is None and not expired:
                self.pulls_rewaited += 1
                topic.held_at.add(max(start, topic.store.earliest))  # still waits there
                return None
            return answer(body)  # type: ignore[arg-type]

        # held where it reads from (the earliest held, if its offset was let go)
        waits_at = max(start, topic.store.earliest)
        topic.held_at.add(waits_at)
        self.holds.hold(ctx, request, key=(topic.name, waits_at), timeout=wait_ms / 1000,
                        wake=wake)

    def subscribe(self, name: str, channel_name: str, stream: ServerStream, handle: object,
                  peer: str) -> Consumer:
        """Register a subscription to channel ``channel_name`` of topic ``name`` (the channel
        made if new); its deliveries are acknowledged through ``handle``, the connection's
        channel, and the stream's id (``peer``: its address, for logs).

        Raises:
            Refusal: no such topic; a new channel past ``max_channels`` or
                ``max_total_channels``.
        """
        topic = self.existing(name)
        channel = topic.channels.get(channel_name)
        if channel is None:
            settings = self.settings
            if len(topic.channels) >= settings.max_channels:
                raise too_many("channels", topic.name, settings.max_channels)
            if self.channel_count >= settings.max_total_channels:
                raise too_many_in_all("channels", settings.max_total_channels)
            channel = self.add_channel(topic, channel_name)
        return self.add_consumer(topic, channel, stream, handle, peer)

    def take(self, consumer: Consumer, count: int, now: float) -> list[tuple[int, int]]:
        """Take up to ``count`` deliveries for ``consumer`` (offsets and attempts), in flight
        until ``msg_timeout`` from ``now``; counted on its connection's bound."""
        queue = consumer.channel.queue
        topic = consumer.topic
        taken = queue.take(consumer.id, count, now, topic.end, topic.deferred)
        if taken:
            subscriber = consumer.subscriber
            if subscriber.deliveries.taken(len(taken)):
                self._reached_bound(subscriber)
            self.schedule(consumer.channel, now + queue.msg_timeout)
        return taken

    def skip(self, consumer: Consumer, offset: int) -> None:
        """A delivery of ``consumer`` whose record was let go of meanwhile (a corrupt
        segment's gap): it ends."""
        if consumer.channel.queue.skip(offset, consumer.id):
            consumer.subscriber.ended(1)

    def _reached_bound(self, subscriber: Subscriber) -> None:
        self.times_at_bound += 1
        times = subscriber.deliveries.times_at_bound
        if times & (times - 1) == 0:  # 1, 2, 4, 8...: a peer cannot flood the log
            log.warning("queue.deliveries_paused", peer=subscriber.peer,
                        in_flight=subscriber.deliveries.limit, paused_on_connection=times)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """The background task (in its server's endpoint nursery until it stops)."""
        if self._closed:  # closed before its server started: nothing to serve
            log.warning("queue.closed", reason="the service was closed before its server "
                        "started")
            return
        now = trio.current_time()
        wall_ms = time.time() * 1000
        for name, pending in self._deferred_wall.items():
            topic = self.topics[name]
            for offset, at in pending:
                topic.deferred.add(offset, 1, now + (at - wall_ms) / 1000)
        for name, keys in self._keys_wall.items():
            topic = self.topics[name]
            for key, first, count, stamp_ms in keys:
                topic.remember(key, first, count, now - (wall_ms - stamp_ms) / 1000)
        self._deferred_wall.clear()
        self._keys_wall.clear()
        for topic in self.topics.values():  # what recovery brought back is timed from now
            self.schedule(topic, topic.next_due())
            self.schedule_retention(topic, now)
            for channel in topic.channels.values():
                if not channel.consumers:
                    channel.idle_since = now
                self.schedule(channel, channel.next_due(self.settings.channel_idle_timeout))
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._timer)
                nursery.start_soon(self._housekeeping)
                nursery.start_soon(self._wake_held_pulls)
        finally:
            self._nursery = None
            self.close()  # sync: nothing in it can be cancelled

    @property
    def closed(self) -> bool:
        """True once `close` ran: the files are closed, nothing is served any more."""
        return self._closed

    def close(self) -> None:
        """Save offsets, fsync and close the segment files (when its server stops, or by
        `QueueService.close`); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._save_offsets()
        for topic in self.topics.values():
            segments = topic.store.log
            if segments is not None:
                if self.settings.fsync != "never":
                    try:
                        fsync_paths(segments.to_sync())
                    except OSError as exc:
                        self.disk_failed("fsync", topic.name, exc)
                segments.close()

    # ------------------------------------------------------------------ timers

    def schedule(self, target: Channel | Topic, deadline: float | None) -> None:
        """Have the timer visit ``target`` at ``deadline`` (None: nothing to do) unless it is
        due earlier already (loop thread)."""
        if deadline is None:
            return
        self._timed[target.timer] = target
        if self.timers.schedule(target.timer, deadline):
            scope = self._timer_scope
            if scope is not None and deadline < scope.deadline:
                scope.deadline = deadline

    def schedule_channel(self, channel: Channel) -> None:
        """Have the timer visit ``channel`` when it next has something to do."""
        self.schedule(channel, channel.next_due(self.settings.channel_idle_timeout))

    def schedule_retention(self, topic: Topic, now: float) -> None:
        """Have the timer visit ``topic`` when its oldest segment outlives ``retention``."""
        segments = topic.store.log
        if self.settings.retention is None or segments is None:
            return
        written = segments.oldest_deletable_written()
        if written is not None:  # its wall clock, on the loop's
            self.schedule(topic, now + max(0.0, written + self.settings.retention - time.time()))

    async def _timer(self) -> None:
        while True:
            deadline = self.timers.next_deadline()
            with trio.CancelScope(deadline=math.inf if deadline is None else deadline) as scope:
                self._timer_scope = scope
                await trio.sleep_forever()
            self._timer_scope = None
            self.expire(trio.current_time())

    def expire(self, now: float) -> None:
        """Do what is due at ``now``: requeue the deliveries whose deadline passed, release
        the messages now due, forget old keys, delete idle channels, and note the topics
        whose retention is due (for housekeeping). Visits only what is due."""
        timed = self._timed
        for key in self.timers.pop_due(now):
            target = timed.pop(key, None)
            if isinstance(target, Channel):
                self._expire_channel(target, now)
            elif target is not None:
                self._expire_topic(target, now)

    def _expire_channel(self, channel: Channel, now: float) -> None:
        topic = channel.topic
        if topic.channels.get(channel.name) is not channel:
            return  # deleted meanwhile
        queue = channel.queue
        returned = queue.expire(now)
        for item in returned:
            consumer = self.consumers.get(item.consumer)  # type: ignore[call-overload]
            if consumer is not None:
                consumer.ended(1)
            if item.dead:
                self.dead(topic, channel, item.offset, item.attempts)
        if returned:
            self.changed(topic)
        if queue.has_ready(now, topic.end):
            topic.waiting.unpark_all()
        idle = self.settings.channel_idle_timeout
        if (idle is not None and channel.idle_since is not None and not channel.consumers
                and now >= channel.idle_since + idle):
            self._delete_channel(topic, channel)
            self.channels_expired += 1
            log.info("queue.channel_expired", topic=topic.name, channel=channel.name,
                     idle_seconds=round(now - channel.idle_since, 3),
                     undelivered=queue.depth(topic.end, topic.deferred))
            return
        self.schedule_channel(channel)

    def _expire_topic(self, topic: Topic, now: float) -> None:
        if self.topics.get(topic.name) is not topic:
            return
        released = topic.release_due(now)
        for first, count in released:
            self.wake_pulls(topic, first, count)
        if released and topic.channels:  # subscribers may deliver what their cursor passed
            topic.waiting.unpark_all()
        topic.forget_keys(now)
        self.schedule(topic, topic.next_due())
        segments = topic.store.log
        if self.settings.retention is not None and segments is not None:
            written = segments.oldest_deletable_written()
            if written is not None and written + self.settings.retention <= time.time():
                self.changed(topic)  # housekeeping deletes the segments

    def deferred_room(self) -> int:
        """How many more deferred messages the service takes (``max_deferred`` less those
        not yet due in all topics; O(topics), asked by deferred publishes only)."""
        return (self.settings.max_deferred
                - sum(len(topic.deferred) for topic in self.topics.values()))

    def wake_pulls(self, topic: Topic, first: int, count: int = 1) -> None:
        """Wake the pulls held at offsets ``first`` to ``first + count - 1`` of ``topic``
        (what was published there, or came due): no other pull."""
        notify = self.holds.notify
        for offset in topic.pulls_waiting(first, count):
            notify((topic.name, offset))

    def wake_pulls_soon(self, topic: Topic, first: int) -> None:
        """Wake the pulls held at offset ``first`` of ``topic`` (what a publish appended)
        once the running task lets the waker task run: after the publish's answer is on its
        way, as RocketMQ notifies from another thread, with no hop through the loop's
        wake-up socket (loop only). Nothing to do when no pull is held on the topic: one
        that comes later finds the records."""
        if not topic.held_at:
            return
        if self._nursery is None:  # the background task is not running (yet): the loop's
            trio.lowlevel.current_trio_token().run_sync_soon(self.wake_pulls, topic, first)
            return
        self._wakes.append((topic, first))
        self._waker.unpark()

    async def _wake_held_pulls(self) -> None:
        """The waker task: wakes the held pulls of the publishes `wake_pulls_soon` was
        told of, all those told of before it ran at once."""
        while True:
            wakes, self._wakes = self._wakes, []
            for topic, first in wakes:
                self.wake_pulls(topic, first)
            await self._waker.park()

    async def _housekeeping(self) -> None:
        last_sync = trio.current_time()
        while True:
            await trio.sleep(HOUSEKEEPING_SECONDS)
            now = trio.current_time()
            self.housekeep(now)
            settings = self.settings
            if settings.fsync == "interval" and now - last_sync >= settings.fsync_interval:
                last_sync = now
                try:
                    await self.sync()
                except OSError as exc:
                    self.disk_failed("fsync", None, exc)
                else:
                    self.disk_ok("fsync", None)

    def housekeep(self, now: float) -> None:
        """Apply retention, trim, and save the offsets of the topics changed since the last
        run (and of those whose disk work failed then: tried again)."""
        dirty, self._dirty = self._dirty, set()
        self._untrimmed.clear()  # trimmed below
        wall = time.time()
        written_before = None if self.settings.retention is None else wall - self.settings.retention
        visit = [self.topics[name] for name in sorted(dirty) if name in self.topics]
        for topic in visit:
            try:
                self._expire(topic, written_before)
                topic.trim()
            except OSError as exc:
                self.disk_failed("delete_segments", topic.name, exc)
                self._dirty.add(topic.name)
            else:
                self.disk_ok("delete_segments", topic.name)
            self.schedule_retention(topic, now)
        self._save_offsets(visit)
        for name in list(self._incarnations_unsaved):
            if name in self.topics:
                self._save_incarnation(name, self.topics[name].incarnation)

    def trim_changed(self) -> None:
        """Let go now of what no channel or group needs in the topics changed since
        housekeeping last ran (a publish past the service's memory total, without a data
        directory, needs the room before the next run)."""
        untrimmed, self._untrimmed = self._untrimmed, set()  # each change is trimmed once
        for name in untrimmed:
            topic = self.topics.get(name)
            if topic is not None and topic.store.log is None:
                topic.trim()

    def written(self, topic: Topic) -> None:
        """Note that ``topic`` was just appended to: close the append descriptor of the
        topic written least recently once more than `MAX_OPEN_APPENDS` are open, and take
        memory back from the caches of the topics written least recently while the service
        holds more than ``total_memory_bytes`` (with a data directory: without one, a publish
        past it is refused before it is appended)."""
        self.changed(topic)
        segments = topic.store.log
        if segments is None:
            return
        appending = self._appending
        if topic.name in appending:
            appending.move_to_end(topic.name)
        else:
            appending[topic.name] = segments
            if len(appending) > MAX_OPEN_APPENDS:
                appending.popitem(last=False)[1].close_append()
        cached = self._cached
        cached[topic.name] = topic
        cached.move_to_end(topic.name)
        budget = self.budget
        while budget.over > 0 and cached:
            name, oldest = next(iter(cached.items()))
            oldest.store.evict(budget.over)
            if oldest.store.in_memory:
                break  # it gave back enough
            del cached[name]
        if budget.over > 0:  # its idempotence keys, then: its oldest go early
            topic.forget_keys(trio.current_time(), budget.over)

    # ------------------------------------------------------------------ reading

    def prefetch(self, topic: Topic, start: int, count: int) -> None:
        """Read a pull's answer that needs the disk in a worker thread, then wake the pulls
        held on ``topic`` again (they find it in ``topic.pull_cache``): for held pulls, whose
        wake is not awaited."""
        key = (topic.name, start, count)
        if self._nursery is None or key in self._prefetching:
            return
        self._prefetching.add(key)
        self.prefetches += 1
        self._nursery.start_soon(self._prefetch, topic, key)

    async def _prefetch(self, topic: Topic, key: tuple[str, int, int]) -> None:
        try:
            await topic.pull_body_async(key[1], key[2], trio.current_time(), self.readers)
        except OSError as exc:
            self.disk_failed("read", topic.name, exc)
            return  # the pulls are answered at their deadline
        finally:
            self._prefetching.discard(key)
        self.holds.notify((topic.name, key[1]))  # the pulls held there find it now

    def _expire(self, topic: Topic, written_before: float | None) -> None:
        """Apply the retention settings to ``topic`` (whoever still needs its records)."""
        if written_before is None and self.settings.retention_bytes is None:
            return
        let_go = topic.expire(written_before, self.settings.retention_bytes)
        if let_go:
            log.info("queue.retention_expired", topic=topic.name, messages=let_go,
                     earliest=topic.store.earliest)
            topic.waiting.unpark_all()  # subscribers waiting at the old place move on

    # ------------------------------------------------------------------ disk failures

    def disk_failed(self, operation: str, topic: str | None, error: OSError) -> None:
        """Log that ``operation`` failed (once until it works again): the service serves on,
        and the operation is tried again (the next publish, the next second)."""
        if (operation, topic) not in self._disk_failing:
            where = "" if topic is None else f" of topic {topic!r}"
            self._disk_failing[operation, topic] = (
                f"{operation}{where} failed: {error} (tried again; see the data directory's "
                "disk)")
            log.error("queue.disk_failed", operation=operation, topic=topic, error=str(error))

    def disk_ok(self, operation: str, topic: str | None) -> None:
        """Note that ``operation`` worked (logged if it had failed)."""
        if self._disk_failing and (operation, topic) in self._disk_failing:
            del self._disk_failing[operation, topic]
            log.info("queue.disk_recovered", operation=operation, topic=topic)

    # ------------------------------------------------------------------ durability

    async def sync(self) -> None:
        """fsync what was written before this call (the writes of a publish being
        acknowledged); calls made while one runs share the next (a group commit).

        Raises:
            OSError: the fsync that covered this call's writes failed (every call sharing
                it gets the error, not only the one that ran it).
        """
        if self.settings.data_dir is None:
            return
        wanted = self._sync_started + 1  # a sync that starts after this call's writes
        while True:
            running = self._sync_round
            if running is None:
                break
            await running.done.wait()
            if running.generation >= wanted:  # it started after this call: it covered it
                running.raise_failure()
                return
        self._sync_started += 1
        this = self._sync_round = SyncRound(self._sync_started)
        paths = [path for topic in self.topics.values() if topic.store.log is not None
                 for path in topic.store.log.to_sync()]
        try:  # (not cancellable: the worker thread is waited for)
            await trio.to_thread.run_sync(fsync_paths, paths)
        except OSError as exc:
            this.error = exc
            raise
        finally:
            self._sync_round = None
            this.done.set()

    def _save_offsets(self, topics: list[Topic] | None = None) -> None:
        """Save the offsets of ``topics`` (None: every topic) that changed since saved."""
        if self.settings.data_dir is None:
            return
        for topic in self.topics.values() if topics is None else topics:
            data = orjson.dumps({
                "groups": topic.groups,
                "channels": {name: c.queue.floor(topic.deferred)
                             for name, c in topic.channels.items()}},
                option=orjson.OPT_SORT_KEYS)
            if self._offsets_saved.get(topic.name) == data:
                continue
            path = self.settings.data_dir / "topics" / topic.name / OFFSETS_FILE
            temporary = path.with_name(OFFSETS_FILE + ".tmp")
            try:
                temporary.write_bytes(data)
                os.replace(temporary, path)
            except OSError as exc:  # the old file stays whole: os.replace is atomic
                self.disk_failed("save_offsets", topic.name, exc)
                self._dirty.add(topic.name)  # tried again at the next run
                continue
            self.disk_ok("save_offsets", topic.name)
            self._offsets_saved[topic.name] = data

    # ------------------------------------------------------------------ consumers

    def add_channel(self, topic: Topic, name: str) -> Channel:
        """Return ``topic``'s channel ``name``, made (and counted) if new, whatever the
        bounds (`subscribe` checks them)."""
        channel = topic.channels.get(name)
        if channel is None:
            channel = topic.channel(name)
            self.channel_count += 1
            self.changed(topic)
        return channel

    def commit(self, topic: Topic, group: str, offset: int) -> None:
        """Set ``group``'s offset (made, and counted, if new).

        Raises:
            Refusal: ``offset`` is past the topic's end; a new group past
                ``max_channels`` or ``max_total_groups``.
        """
        if offset > topic.end:
            raise past_end(offset, topic, ": commit the next offset to read")
        if group not in topic.groups:
            settings = self.settings
            if len(topic.groups) >= settings.max_channels:
                raise too_many("groups", topic.name, settings.max_channels)
            if self.group_count >= settings.max_total_groups:
                raise too_many_in_all("groups", settings.max_total_groups)
        self.group_count += group not in topic.groups
        topic.groups[group] = offset
        self.changed(topic)

    def delete_channel(self, topic_name: str, channel_name: str) -> bool:
        """Forget a channel (its position and deliveries); return False if there is none.

        Raises:
            RuntimeError: it has subscribers.
        """
        topic = self.topics.get(topic_name)
        channel = None if topic is None else topic.channels.get(channel_name)
        if topic is None or channel is None:
            return False
        if channel.consumers:
            raise RuntimeError(f"channel {channel_name!r} of topic {topic_name!r} has "
                               f"{len(channel.consumers)} subscribers: delete it once they "
                               "have left")
        self._delete_channel(topic, channel)
        return True

    def _delete_channel(self, topic: Topic, channel: Channel) -> None:
        del topic.channels[channel.name]
        self.channel_count -= 1
        self.timers.discard(channel.timer)
        self._timed.pop(channel.timer, None)
        self.changed(topic)

    def delete_group(self, topic_name: str, group: str) -> bool:
        """Forget a group's committed offset; return False if there is none."""
        topic = self.topics.get(topic_name)
        if topic is None or topic.groups.pop(group, None) is None:
            return False
        self.group_count -= 1
        self.changed(topic)
        return True

    def add_consumer(self, topic: Topic, channel: Channel, stream: ServerStream,
                     handle: object, peer: str) -> Consumer:
        """Register a subscription to ``channel`` (see `subscribe`)."""
        subscriber = self.subscribers.get(handle)
        if subscriber is None:
            subscriber = self.subscribers[handle] = Subscriber(
                self.settings.max_in_flight_per_connection, peer)
        subscriber.subscriptions += 1
        consumer = Consumer(next(self._ids), topic, channel, stream, (handle, stream.stream_id),
                            subscriber)
        self.consumers[consumer.id] = consumer
        self.by_stream[consumer.key] = consumer
        channel.consumers.add(consumer.id)
        channel.idle_since = None
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """Forget a subscription; its deliveries go back to the channel (or dead-letter)."""
        self.consumers.pop(consumer.id, None)
        # Its stream id may be open again already, for a new subscription of the same
        # connection (the stream left the transport's table before this task ended): only
        # forget the key if it is still this subscription's.
        if self.by_stream.get(consumer.key) is consumer:
            del self.by_stream[consumer.key]
        channel = consumer.channel
        channel.consumers.discard(consumer.id)
        returned = channel.queue.consumer_gone(consumer.id)
        subscriber = consumer.subscriber
        subscriber.subscriptions -= 1
        # its room goes back to the connection; and if it was woken to take its turn, the
        # turn passes to another paused subscription (`ended` wakes one if there is room)
        subscriber.ended(len(returned))
        if not subscriber.subscriptions:
            handle = consumer.key[0]
            if self.subscribers.get(handle) is subscriber:
                del self.subscribers[handle]
        for item in returned:
            if item.dead:
                self.dead(consumer.topic, channel, item.offset, item.attempts)
        if returned:
            consumer.topic.waiting.unpark_all()
            self.changed(consumer.topic)
        if not channel.consumers and consumer.topic.channels.get(channel.name) is channel:
            channel.idle_since = trio.current_time()
            self.schedule_channel(channel)

    def dead(self, topic: Topic, channel: Channel, offset: int, attempts: int) -> None:
        """Hand a dead-lettered message to the hook (or log it)."""
        if self.dead_letter is None:
            log.warning("queue.dead_lettered", topic=topic.name, channel=channel.name,
                        offset=offset, attempts=attempts)
            return
        try:
            records = topic.read([offset])
        except OSError as exc:
            self.disk_failed("read", topic.name, exc)
            records = {}
        if offset not in records:
            log.warning("queue.dead_lettered", topic=topic.name, channel=channel.name,
                        offset=offset, attempts=attempts)
            return
        message = Message(topic.name, record_fields(records[offset])[0], attempts)
        try:
            self.dead_letter(channel.name, message)
        except Exception:
            log.error("queue.dead_letter_failed", topic=topic.name, channel=channel.name,
                      offset=offset, exc_info=True)

    # ------------------------------------------------------------------ statistics

    def connections_at_bound(self) -> int:
        """Connections whose subscriptions hold ``max_in_flight_per_connection`` deliveries
        (delivery to them is paused until some end)."""
        return sum(1 for s in list(self.subscribers.values()) if s.deliveries.room == 0)

    def statistics(self, topic: str | None = None, *, after: str | None = None,
                   limit: int | None = None, detail: bool = False) -> QueueStatistics:
        """Return a snapshot (on the loop thread, or once it has stopped): the service's
        totals; with ``topic``, that topic with its channels and groups (bounded by
        ``max_channels`` each); with ``limit``, up to ``limit`` topics in name order after
        ``after``, each with its counts but not its channels and groups (with ``detail``,
        with them: for a small ``limit``). What one snapshot costs is bounded whatever the
        service holds."""
        topics: dict[str, TopicStatistics] = {}
        next_after = None
        if topic is not None:
            found = self.topics.get(topic)
            if found is not None:
                topics[topic] = self._topic_statistics(found, detail=True)
        elif limit is not None:
            names = self._names
            start = 0 if after is None else bisect.bisect_right(names, after)
            page = names[start:start + limit]
            topics = {name: self._topic_statistics(self.topics[name], detail=detail)
                      for name in page}
            if start + limit < len(names):
                next_after = page[-1]
        problems = [str(p) for p in self.problems] + list(self._disk_failing.values())
        return QueueStatistics(
            topics=topics, held_pulls=len(self.holds),
            connections_at_bound=self.connections_at_bound(),
            times_at_bound=self.times_at_bound, problems=problems[:MAX_PROBLEMS_SHOWN],
            problem_count=len(problems), topic_count=len(self.topics),
            channel_count=self.channel_count, group_count=self.group_count,
            memory_bytes=self.budget.used, total_memory_bytes=self.budget.limit,
            pulls_refused=self.pulls_refused, channels_expired=self.channels_expired,
            next_after=next_after)

    def _topic_statistics(self, topic: Topic, detail: bool) -> TopicStatistics:
        end = topic.end
        name = topic.name
        channels: dict[str, ChannelStatistics] = {}
        groups: dict[str, GroupStatistics] = {}
        if detail:
            channels = {
                c.name: ChannelStatistics(
                    depth=c.queue.depth(end, topic.deferred), in_flight=len(c.queue.in_flight),
                    deferred=c.queue.waiting(topic.deferred), consumers=len(c.consumers),
                    delivered=c.queue.delivered, finished=c.queue.finished,
                    requeued=c.queue.requeued, timed_out=c.queue.timed_out,
                    dead_lettered=c.queue.dead_lettered, expired=c.queue.expired,
                    acks_refused=self.acks_refused.get((name, c.name), 0))
                for c in topic.channels.values()}
            groups = {g: GroupStatistics(offset=o, lag=max(0, end - o))
                      for g, o in topic.groups.items()}
        store = topic.store
        return TopicStatistics(
            earliest=store.earliest, end=end, in_memory=store.in_memory,
            memory_bytes=store.memory_size,
            disk_bytes=0 if store.log is None else store.log.size_bytes,
            published=topic.published, duplicates=topic.duplicates,
            channel_count=len(topic.channels), group_count=len(topic.groups),
            incarnation=topic.incarnation, channels=channels, groups=groups)
