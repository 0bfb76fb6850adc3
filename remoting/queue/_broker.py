"""`Broker`: the queue service's topics, channels, groups and subscriptions, and what changes
them (NSQ's model with RocketMQ's offsets), in one process.

Theory of operation:
- Everything the service holds is owned by the server's loop thread: its processors
  (`_handlers`) are async and run there, as does its background task (attached with the
  server's endpoint): the in-flight deadlines and deferred messages (`_timer`), retention, key
  expiry, offsets and fsync (`_housekeeping`). Its file I/O is synchronous on the loop (small
  writes to the page cache, reads of segments), except fsync, which runs in a worker thread
  on duplicated descriptors (`SegmentLog.sync_fds`).
- A publish is acknowledged once its records are in the topic's store: in memory, and, with
  a data directory, written to the topic's segment file (the kernel holds them: they survive
  the process). ``fsync`` says when they reach the disk: ``"always"`` before the
  acknowledgement (publishes arriving meanwhile share one fsync), ``"interval"`` every
  ``fsync_interval`` seconds, ``"never"`` when the kernel decides.
- Subscriptions are credit-based streams: a subscriber's credits bound the deliveries it
  holds (NSQ's RDY); its acknowledgements give them back (`Consumer`).
- Pulls with nothing to read are held (`HeldRequests`, keyed by topic) and woken by a
  publish, or a deferred message coming due.
- With a data directory, every topic's records, group offsets and channel positions are
  recovered when the broker is made; what recovery found wrong is in ``problems`` (and
  logged), the rest is served.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from typing import TYPE_CHECKING, Final, Literal

import orjson
import trio

from .._core._receiving._held import HeldRequests
from .._log import log
from .._messaging._records import record_fields
from ._messages import Message
from ._segments import SegmentLog
from ._stats import ChannelStatistics, GroupStatistics, QueueStatistics, TopicStatistics
from ._store import TopicStore
from ._topic import Topic

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from processors import ServerStream

    from ._segments import Problem
    from ._topic import Channel

__all__ = ["Broker", "Consumer", "FsyncPolicy"]

FsyncPolicy = Literal["always", "interval", "never"]
HOUSEKEEPING_SECONDS: Final = 1.0  # retention, key expiry, offsets to disk (and fsync)
DEFAULT_SEGMENT_BYTES: Final = 64 * 1024 * 1024
DEFAULT_DEDUP_WINDOW: Final = 600.0  # seconds a publish's key is remembered
OFFSETS_FILE: Final = "offsets.json"


class Consumer:
    """One subscription: which channel it reads, and the stream it is sent on."""

    __slots__ = ("channel", "id", "key", "stream", "topic")

    def __init__(self, consumer_id: int, topic: Topic, channel: Channel,
                 stream: ServerStream, key: tuple[object, int]) -> None:
        self.id = consumer_id
        self.topic = topic
        self.channel = channel
        self.stream = stream
        self.key = key  # (the connection's channel handle, the stream's id)


def _fsync_all(fds: list[int]) -> None:
    """fsync and close ``fds`` (in a worker thread)."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


class Broker:
    """The queue's state and what changes it, owned by its server's event loop (see the module
    docstring); `QueueService` is its public face."""

    def __init__(self, *, data_dir: Path | None, memory_messages: int, msg_timeout: float,
                 max_attempts: int, dead_letter: Callable[[str, Message], object] | None,
                 fsync: FsyncPolicy, fsync_interval: float, segment_bytes: int,
                 dedup_window: float) -> None:
        self.data_dir = data_dir
        self.memory_messages = memory_messages
        self.msg_timeout = msg_timeout
        self.max_attempts = max_attempts
        self.dead_letter = dead_letter
        self.fsync: FsyncPolicy = fsync
        self.fsync_interval = fsync_interval
        self.segment_bytes = segment_bytes
        self.dedup_window = dedup_window
        self.topics: dict[str, Topic] = {}
        self.problems: list[Problem] = []
        self.holds = HeldRequests()
        self.consumers: dict[int, Consumer] = {}
        self.by_stream: dict[tuple[object, int], Consumer] = {}
        self.acks_refused: dict[tuple[str, str], int] = {}
        self._ids = itertools.count(1)
        self._timer_scope: trio.CancelScope | None = None
        self._armed = math.inf
        self._offsets_saved: dict[str, bytes] = {}
        # what recovery found on the wall clock, put on the loop's clock when it runs
        self._deferred_wall: dict[str, list[tuple[int, int]]] = {}
        self._keys_wall: dict[str, list[tuple[str, int, int, int]]] = {}
        self._sync_started = self._sync_done = 0
        self._sync_running = False
        self._synced = trio.Event()
        self._closed = False
        if self.data_dir is not None:
            self._recover(self.data_dir)

    # ------------------------------------------------------------------ topics

    def topic(self, name: str) -> Topic | None:
        """Return the topic ``name`` if it exists (loop thread)."""
        return self.topics.get(name)

    def create_topic(self, name: str) -> Topic:
        """Return the topic ``name``, made (and its directory) if new (loop thread)."""
        found = self.topics.get(name)
        if found is None:
            log_ = None if self.data_dir is None else SegmentLog(
                self.data_dir / "topics" / name, self.segment_bytes)
            found = self.topics[name] = self._topic(name, log_)
        return found

    def _topic(self, name: str, segments: SegmentLog | None) -> Topic:
        return Topic(name, TopicStore(self.memory_messages, segments),
                     msg_timeout=self.msg_timeout, max_attempts=self.max_attempts,
                     dedup_window=self.dedup_window)

    def _recover(self, data_dir: Path) -> None:
        root = data_dir / "topics"
        root.mkdir(parents=True, exist_ok=True)
        now_ms = int(time.time() * 1000)
        for directory in sorted(p for p in root.iterdir() if p.is_dir()):
            segments = SegmentLog(directory, self.segment_bytes)
            topic = self.topics[directory.name] = self._topic(directory.name, segments)
            recovered = segments.recovered
            for problem in recovered.problems:
                self.problems.append(problem)
                if problem.kind == "corrupt":
                    log.error("queue.segment_corrupt", topic=directory.name,
                              file=str(problem.path), position=problem.position,
                              reason=problem.reason, set_aside=str(problem.set_aside))
                else:
                    log.warning("queue.segment_truncated", topic=directory.name,
                                file=str(problem.path), position=problem.position)
            window_ms = self.dedup_window * 1000
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
            groups = {str(g): int(o) for g, o in saved.get("groups", {}).items()}
            channels = {str(c): int(o) for c, o in saved.get("channels", {}).items()}
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as exc:
            log.error("queue.offsets_unreadable", file=str(path), error=str(exc))
            return
        topic.groups.update(groups)
        for name, floor in channels.items():
            topic.channel(name, floor)
        self._offsets_saved[topic.name] = path.read_bytes()

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """The background task (in its server's endpoint nursery until it stops)."""
        now = trio.current_time()
        wall_ms = time.time() * 1000
        for name, pending in self._deferred_wall.items():
            topic = self.topics[name]
            for offset, at in pending:
                topic.deferred[offset] = now + (at - wall_ms) / 1000
        for name, keys in self._keys_wall.items():
            topic = self.topics[name]
            for key, first, count, stamp_ms in keys:
                topic.keys.add(key, first, count, now - (wall_ms - stamp_ms) / 1000)
        self._deferred_wall.clear()
        self._keys_wall.clear()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._timer)
                nursery.start_soon(self._housekeeping)
        finally:
            self.close()  # sync: nothing in it can be cancelled

    def close(self) -> None:
        """Save offsets, fsync and close the segment files (when its server stops)."""
        if self._closed:
            return
        self._closed = True
        self._save_offsets()
        for topic in self.topics.values():
            segments = topic.store.log
            if segments is not None:
                if self.fsync != "never":
                    _fsync_all(segments.sync_fds())
                segments.close()

    # ------------------------------------------------------------------ timers

    def arm(self, deadline: float) -> None:
        """Wake the timer at ``deadline`` if that is before what it sleeps until."""
        if deadline < self._armed:
            self._armed = deadline
            if self._timer_scope is not None:
                self._timer_scope.deadline = deadline

    async def _timer(self) -> None:
        while True:
            with trio.CancelScope(deadline=self._next_deadline()) as scope:
                self._armed = scope.deadline
                self._timer_scope = scope
                await trio.sleep_forever()
            self._timer_scope = None
            self.expire(trio.current_time())

    def _next_deadline(self) -> float:
        deadline = math.inf
        for topic in self.topics.values():
            for channel in topic.channels.values():
                due = channel.queue.next_deadline()
                if due is not None and due < deadline:
                    deadline = due
            if topic.deferred:
                later = [due for due in topic.deferred.values() if due > trio.current_time()]
                if later:
                    deadline = min(deadline, min(later))
        return deadline

    def expire(self, now: float) -> None:
        """Requeue the deliveries whose deadline passed and release the messages now due."""
        for topic in self.topics.values():
            woken = False
            for channel in topic.channels.values():
                queue = channel.queue
                for returned in queue.expire(now):
                    consumer = self.consumers.get(returned.consumer)  # type: ignore[call-overload]
                    if consumer is not None:
                        consumer.stream.add_credits(1)
                    if returned.dead:
                        self.dead(topic, channel, returned.offset, returned.attempts)
                if queue.has_ready(now, topic.end):
                    woken = True
            if topic.deferred and any(due <= now for due in topic.deferred.values()):
                self.holds.notify(topic.name)
                topic.forget_due(now)
            if woken:
                topic.waiting.unpark_all()

    async def _housekeeping(self) -> None:
        last_sync = trio.current_time()
        while True:
            await trio.sleep(HOUSEKEEPING_SECONDS)
            now = trio.current_time()
            for topic in self.topics.values():
                topic.keys.expire(now)
                topic.forget_due(now)
                topic.trim()
            self._save_offsets()
            if self.fsync == "interval" and now - last_sync >= self.fsync_interval:
                last_sync = now
                await self.sync()

    # ------------------------------------------------------------------ durability

    async def sync(self) -> None:
        """fsync what was written before this call (the writes of a publish being
        acknowledged); calls made while one runs share the next (a group commit)."""
        if self.data_dir is None:
            return
        wanted = self._sync_started + 1  # a sync that starts after this call's writes
        while self._sync_done < wanted:
            if self._sync_running:
                await self._synced.wait()
                continue
            self._sync_running = True
            self._sync_started += 1
            generation = self._sync_started
            fds = [fd for topic in self.topics.values() if topic.store.log is not None
                   for fd in topic.store.log.sync_fds()]
            try:
                await trio.to_thread.run_sync(_fsync_all, fds)
            finally:
                self._sync_done = generation
                self._sync_running = False
                synced, self._synced = self._synced, trio.Event()
                synced.set()

    def _save_offsets(self) -> None:
        if self.data_dir is None:
            return
        for topic in self.topics.values():
            data = orjson.dumps({
                "groups": topic.groups,
                "channels": {name: c.queue.floor() for name, c in topic.channels.items()}},
                option=orjson.OPT_SORT_KEYS)
            if self._offsets_saved.get(topic.name) == data:
                continue
            path = self.data_dir / "topics" / topic.name / OFFSETS_FILE
            temporary = path.with_name(OFFSETS_FILE + ".tmp")
            temporary.write_bytes(data)
            os.replace(temporary, path)
            self._offsets_saved[topic.name] = data

    # ------------------------------------------------------------------ consumers

    def add_consumer(self, topic: Topic, channel: Channel, stream: ServerStream,
                     handle: object) -> Consumer:
        """Register a subscription (its deliveries are acknowledged through ``handle``, the
        connection's channel, and the stream's id)."""
        consumer = Consumer(next(self._ids), topic, channel, stream, (handle, stream.stream_id))
        self.consumers[consumer.id] = consumer
        self.by_stream[consumer.key] = consumer
        channel.consumers.add(consumer.id)
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """Forget a subscription; its deliveries go back to the channel (or dead-letter)."""
        self.consumers.pop(consumer.id, None)
        self.by_stream.pop(consumer.key, None)
        channel = consumer.channel
        channel.consumers.discard(consumer.id)
        returned = channel.queue.consumer_gone(consumer.id)
        for item in returned:
            if item.dead:
                self.dead(consumer.topic, channel, item.offset, item.attempts)
        if returned:
            consumer.topic.waiting.unpark_all()

    def dead(self, topic: Topic, channel: Channel, offset: int, attempts: int) -> None:
        """Hand a dead-lettered message to the hook (or log it)."""
        if self.dead_letter is None:
            log.warning("queue.dead_lettered", topic=topic.name, channel=channel.name,
                        offset=offset, attempts=attempts)
            return
        records = topic.read([offset])
        if offset not in records:
            return
        message = Message(topic.name, record_fields(records[offset])[0], attempts)
        try:
            self.dead_letter(channel.name, message)
        except Exception:
            log.error("queue.dead_letter_failed", topic=topic.name, channel=channel.name,
                      offset=offset, exc_info=True)

    # ------------------------------------------------------------------ statistics

    def statistics(self) -> QueueStatistics:
        """Return a snapshot (on the loop thread, or once it has stopped)."""
        topics = {}
        for name, topic in self.topics.items():
            end = topic.end
            channels = {
                c.name: ChannelStatistics(
                    depth=c.queue.depth(end), in_flight=len(c.queue.in_flight),
                    deferred=c.queue.waiting_later, consumers=len(c.consumers),
                    delivered=c.queue.delivered, finished=c.queue.finished,
                    requeued=c.queue.requeued, timed_out=c.queue.timed_out,
                    dead_lettered=c.queue.dead_lettered,
                    acks_refused=self.acks_refused.get((name, c.name), 0))
                for c in topic.channels.values()}
            groups = {g: GroupStatistics(offset=o, lag=max(0, end - o))
                      for g, o in topic.groups.items()}
            topics[name] = TopicStatistics(
                earliest=topic.store.earliest, end=end, in_memory=topic.store.in_memory,
                published=topic.published, duplicates=topic.duplicates, channels=channels,
                groups=groups)
        return QueueStatistics(topics=topics, held_pulls=len(self.holds),
                               problems=[str(p) for p in self.problems])

