"""The consumer engine: one source for the push and lite pull consumers of both faces
(Java's ``DefaultMQPushConsumerImpl``, ``DefaultLitePullConsumerImpl``, ``RebalanceImpl``,
``PullMessageService``, ``ConsumeMessageConcurrentlyService`` / ``OrderlyService`` and the
offset stores), written for trio and run on a `TrioRemotingClient`: in the caller's trio
loop (trio faces) or in a loop thread of the consumer's own (blocking faces).

Theory of operation.

- **Membership.** The client heartbeats its group and subscriptions to every broker of its
  routes (at start, every 30 s). In clustering mode each subscribed topic's readable queues
  are shared among the group's members (`allocate_averagely` over GET_CONSUMER_LIST_BY_GROUP)
  at start, every 20 s and at once when a broker sends NOTIFY_CONSUMER_IDS_CHANGED (a member
  came or went); in broadcasting mode a member takes every queue. A push consumer in
  clustering mode also subscribes its group's retry topic (``%RETRY%group``), as Java's does.
- **A queue** (`QueueState`) is pulled by one task: one PULL_MESSAGE at a time, held by the
  broker up to 15 s while there is nothing new, so a message sent reaches a waiting consumer
  at once. Pulled messages wait in its `ProcessQueue`; over its thresholds the task waits
  (``room``) until handling makes room. A queue taken away by a rebalance is *dropped*: its
  task is cancelled, its offset stored, and results for it no longer move offsets.
- **Handling** (push): each pull's messages go to the handler in one job on a worker thread
  (at most ``consume_threads`` at once), one message per call; a handler that raises sends
  its message back (CONSUMER_SEND_MSG_BACK: the broker puts it in the retry topic with a
  delay, or in ``%DLQ%group`` past ``max_reconsume_times``). Orderly consumers hold the
  broker's lock of each queue (LOCK_BATCH_MQ, renewed every 20 s) and handle one queue's
  messages one at a time in offset order; a failure is retried in place after 1 s.
- **Offsets.** After handling, the queue's offset moves to its lowest message not handled
  (`ProcessQueue.remove`); changed offsets are stored every 5 s and at shutdown
  (UPDATE_CONSUMER_OFFSET, or a local file in broadcasting mode), and a queue newly taken
  starts from the group's stored offset (QUERY_CONSUMER_OFFSET), else from ``consume_from``.
- **Lite pull**: pulled messages go to a `PollBuffer` instead; ``poll`` takes them and
  moves the offsets past them; ``commit`` stores the offsets now.

Shutdown: pulls stop, running jobs finish (within ``shutdown_timeout``), offsets are stored,
orderly locks released, and the client unregisters from the brokers (which tell the other
members at once).
"""

from __future__ import annotations

import inspect
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor

from .._errors import RemotingError
from .._log import log
from ._drive import run_trio
from ._errors import MQBrokerError, RocketMQError, TopicRouteError
from ._flows import (
    NOT_FOUND,
    consumer_ids,
    heartbeat,
    lock_queues,
    query_offset,
    queue_offset,
    refresh_routes,
    unlock_queues,
    unregister,
    update_offset,
)
from ._offsets import OffsetTable, allocate_averagely, dump_file, load_file
from ._process_queue import MAX_BYTES, MAX_MESSAGES, MAX_SPAN, ProcessQueue
from ._protocol import RETRY_PREFIX, Code, PullStatus, retry_topic, send_back_request
from ._pull import CALL_MARGIN, PULL_BATCH, SUSPEND, pull_request, pull_result
from ._subscription import ConsumerData, Subscription
from ._telemetry import NO_SPAN

if TYPE_CHECKING:
    from processors import RequestContext

    from .. import TrioRemotingClient
    from ._instance import ClientState
    from ._message import Message, MessageQueue
    from ._telemetry import RocketMQTelemetry

__all__ = ["ConsumeFrom", "ConsumerSettings", "ConsumerStatistics", "Engine", "PollBuffer",
           "QueueState", "SHUTDOWN_CALLS_SECONDS", "statistics_of"]

ConsumeFrom = Literal["first", "last"] | int
PULL_RETRY_DELAY: Final = 1.0  # ClientConfig.pullTimeDelayMillsWhenException
FLOW_CONTROL_DELAY: Final = 0.02  # PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL
ORDERLY_RETRY_DELAY: Final = 1.0  # suspendCurrentQueueTimeMillis
SEND_BACK_RETRY_DELAY: Final = 5.0  # submitConsumeRequestLater
# What shutdown's calls may take together once the handlers are done or abandoned: storing
# the offsets, releasing orderly locks, unregistering (each call bounded by its own timeout)
SHUTDOWN_CALLS_SECONDS: Final = 10.0
LOCK_LIFETIME: Final = 30.0  # ProcessQueue.REBALANCE_LOCK_MAX_LIVE_TIME
LOCK_RETRY: Final = 2.0  # a queue another member still locks: try again this soon
MISSING_ROUTE_RETRY: Final = 3.0  # a subscribed topic no name server knows yet
_FROM_WHERE: Final = {"first": "CONSUME_FROM_FIRST_OFFSET", "last": "CONSUME_FROM_LAST_OFFSET"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSettings:
    """Everything a consumer engine is told at its start."""

    group: str
    subscriptions: tuple[tuple[str, str], ...]  # (topic, tag expression); empty: assign mode
    push: bool
    broadcasting: bool = False
    orderly: bool = False
    consume_from: ConsumeFrom = "last"
    max_reconsume_times: int = 16
    retry_delay_level: int = 0  # 0: the broker's (3 + reconsume times)
    pull_batch: int = PULL_BATCH
    consume_threads: int = 20
    max_cached_messages: int = MAX_MESSAGES
    max_cached_bytes: int = MAX_BYTES
    max_span: int = MAX_SPAN
    suspend: float = SUSPEND
    offsets_dir: str | None = None
    shutdown_timeout: float = 10.0
    auto_commit: bool = True
    poll_buffer_messages: int = 10_000  # lite pull: pullThresholdForAll

    def consume_from_where(self) -> str:
        if isinstance(self.consume_from, int):
            return "CONSUME_FROM_TIMESTAMP"
        return _FROM_WHERE[self.consume_from]


@dataclass(eq=False)
class QueueState:
    """One queue this consumer reads: its messages, next pull offset and task."""

    queue: MessageQueue
    subscription: Subscription
    pq: ProcessQueue
    next_offset: int = -1
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    room: trio.Event = field(default_factory=trio.Event)  # set when handling made room
    work: trio.Event = field(default_factory=trio.Event)  # orderly: messages arrived
    consuming: trio.Lock = field(default_factory=trio.Lock)  # orderly: a handler runs
    generation: int = 0  # bumped by seek: older pulls' messages are dropped
    failures: int = 0  # pulls failed in a row (logged at the 1st, 2nd, 4th...)
    first_pull: bool = True  # orderly: read the offset again once locked


class PollBuffer:
    """The lite pull consumer's pulled messages waiting for ``poll`` (any thread or task).

    The engine's loop puts; a blocking ``poll`` waits on the condition, a trio one on an
    event of its loop (the trio face's engine runs in that same loop).
    """

    def __init__(self) -> None:
        self._items: deque[tuple[QueueState, int, list[Message]]] = deque()
        self.count = 0
        self._cond = threading.Condition()
        self._trio_waiters: list[trio.Event] = []

    def put(self, qs: QueueState, messages: list[Message]) -> None:
        with self._cond:
            self._items.append((qs, qs.generation, messages))
            self.count += len(messages)
            self._cond.notify_all()
            waiters, self._trio_waiters = self._trio_waiters, []
        for event in waiters:
            event.set()

    def take(self, limit: int) -> list[tuple[QueueState, list[Message]]]:
        """Take up to ``limit`` messages still current (their queue kept, not sought)."""
        out: list[tuple[QueueState, list[Message]]] = []
        taken = 0
        with self._cond:
            while self._items and taken < limit:
                qs, generation, messages = self._items[0]
                if qs.pq.dropped or generation != qs.generation:
                    self._items.popleft()
                    self.count -= len(messages)
                    continue
                room = limit - taken
                if len(messages) <= room:
                    self._items.popleft()
                    part = messages
                else:
                    part, rest = messages[:room], messages[room:]
                    self._items[0] = (qs, generation, rest)
                self.count -= len(part)
                taken += len(part)
                out.append((qs, part))
        return out

    def wait_blocking(self, timeout: float) -> bool:
        """Wait in a thread until something is put or ``timeout`` passes."""
        with self._cond:
            if self._items:
                return True
            return self._cond.wait(timeout)

    async def wait_trio(self, timeout: float) -> None:
        """Wait in the engine's trio loop until something is put or ``timeout`` passes."""
        with self._cond:
            if self._items:
                return
            event = trio.Event()
            self._trio_waiters.append(event)
        with trio.move_on_after(timeout):
            await event.wait()

    def __len__(self) -> int:
        return self.count


Handler = Callable[["Message"], object]


class _Notified(AsyncRequestProcessor):
    """NOTIFY_CONSUMER_IDS_CHANGED from a broker: rebalance now."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        log.info("rocketmq.members_changed", group=self._engine.group, broker=ctx.remote_addr)
        self._engine.rebalance_soon()
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


class Engine:
    """A consumer's state and tasks on one trio loop (see the module docstring)."""

    def __init__(self, settings: ConsumerSettings, state: ClientState,
                 client: TrioRemotingClient, *, handler: Handler | None = None,
                 buffer: PollBuffer | None = None,
                 telemetry: RocketMQTelemetry | None = None) -> None:
        self.settings = settings
        self.state = state
        self.client = client
        self.group = settings.group
        self._handler = handler
        self._async_handler = handler is not None and inspect.iscoroutinefunction(handler)
        self.buffer = buffer
        self._telemetry = telemetry
        version = time.time_ns() // 1_000_000
        self.subscriptions: dict[str, Subscription] = {
            topic: Subscription.parse(topic, expression, version)
            for topic, expression in settings.subscriptions}
        if settings.push and not settings.broadcasting and self.subscriptions:
            retry = retry_topic(settings.group)
            self.subscriptions[retry] = Subscription.parse(retry, "*", version)
        self.assigned: dict[MessageQueue, QueueState] = {}
        self.manual: list[MessageQueue] | None = None  # lite pull's assign()
        self.offsets = OffsetTable()
        self._limiter = trio.CapacityLimiter(max(1, settings.consume_threads))
        self._pulls: trio.Nursery | None = None
        self._jobs: trio.Nursery | None = None
        self._wake = trio.Event()  # the timer loop looks again: stop or rebalance now
        self._rebalance_now = False
        self._stopping = False
        self._stopped = trio.Event()
        self._running_jobs = 0
        self._jobs_idle = trio.Event()
        self._jobs_idle.set()
        self.token: trio.lowlevel.TrioToken | None = None
        self.statistics = ConsumerCounters()
        self._offsets_file = self._file_path() if settings.broadcasting else None
        state.consumers = [ConsumerData(
            settings.group, "CONSUME_PASSIVELY" if settings.push else "CONSUME_ACTIVELY",
            "BROADCASTING" if settings.broadcasting else "CLUSTERING",
            settings.consume_from_where(), tuple(self.subscriptions.values()))]

    def _file_path(self) -> str:
        base = self.settings.offsets_dir or os.path.join(
            os.path.expanduser("~"), ".rocketmq_offsets", self.state.client_id.split("@")[0])
        return os.path.join(base, self.group, "offsets.json")

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Start, report started, serve until `stop`, then shut down gracefully."""
        self.token = trio.lowlevel.current_trio_token()
        self.client.register_processor(Code.NOTIFY_CONSUMER_IDS_CHANGED, _Notified(self))
        if self._offsets_file is not None:
            for queue, offset in load_file(self._offsets_file).items():
                self.offsets.update(queue, offset)
                self.offsets.stored(queue, offset)
        await self._refresh_routes()
        await run_trio(heartbeat(self.state), self.client)
        jobs = ["routes", "heartbeat", "offsets", "rebalance"]
        if self.settings.orderly:
            jobs.append("locks")
        self.state.start_timers(time.monotonic(), jobs)
        try:
            async with trio.open_nursery() as jobs_nursery:
                self._jobs = jobs_nursery
                async with trio.open_nursery() as pulls:
                    self._pulls = pulls
                    await self._rebalance()
                    task_status.started()
                    log.info("rocketmq.consumer_started", group=self.group,
                             client_id=self.state.client_id,
                             queues=len(self.assigned))
                    await self._serve()
                    pulls.cancel_scope.cancel()
                for qs in self.assigned.values():
                    qs.work.set()  # orderly tasks waiting for messages end now
                with trio.move_on_after(self.settings.shutdown_timeout) as waited:
                    await self._wait_jobs()
                if waited.cancelled_caught:
                    log.warning("rocketmq.shutdown_jobs_abandoned", group=self.group,
                                running=self._running_jobs)
                jobs_nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_CALLS_SECONDS):
                await self._shutdown()
            self._stopped.set()

    def stop(self) -> None:
        """Ask the engine to shut down (from its loop)."""
        self._stopping = True
        self._wake.set()

    async def wait_stopped(self) -> None:
        """Wait until the engine has shut down."""
        await self._stopped.wait()

    async def _serve(self) -> None:
        state = self.state
        while not self._stopping:
            now = time.monotonic()
            due = state.due(now)
            if self._rebalance_now:
                self._rebalance_now = False
                if "rebalance" not in due:
                    due.append("rebalance")
            for job in due:
                try:
                    await self._job(job)
                except (RemotingError, RocketMQError) as exc:
                    log.warning("rocketmq.timer_failed", job=job, error=str(exc)[:200])
            if self._stopping or self._rebalance_now:
                continue
            next_due = state.next_due() or now + 1
            with trio.move_on_after(max(0.0, next_due - time.monotonic())):
                await self._wake.wait()
            if self._wake.is_set():
                self._wake = trio.Event()

    async def _job(self, job: str) -> None:
        if job == "routes":
            await self._refresh_routes()
        elif job == "heartbeat":
            await run_trio(heartbeat(self.state), self.client)
        elif job == "offsets":
            if self.settings.push or self.settings.auto_commit:
                await self.store_offsets()
        elif job == "rebalance":
            await self._rebalance()
        elif job == "locks":
            await self._renew_locks()

    def rebalance_soon(self) -> None:
        """Rebalance as soon as the timer loop looks (a member joined or left)."""
        self._rebalance_now = True
        self._wake.set()

    async def _shutdown(self) -> None:
        for qs in list(self.assigned.values()):
            qs.pq.dropped = True
        if self.settings.push or self.settings.auto_commit:
            try:
                await self.store_offsets()
            except (RemotingError, RocketMQError) as exc:
                log.warning("rocketmq.offset_not_stored", group=self.group,
                            error=str(exc)[:200])
        if self.settings.orderly:
            await self._unlock(list(self.assigned))
        self.assigned.clear()
        await run_trio(unregister(self.state, consumer_group=self.group), self.client)
        log.info("rocketmq.consumer_stopped", group=self.group, client_id=self.state.client_id)

    # ------------------------------------------------------------------ routes

    async def _refresh_routes(self) -> None:
        topics = list(self.subscriptions)
        if self.manual is not None:
            topics = sorted({q.topic for q in self.manual} | set(topics))
        before = {t: self.state.routes.get(t) for t in topics}
        await run_trio(refresh_routes(self.state, topics, producer=False), self.client)
        if any(self.state.routes.get(t) != route for t, route in before.items()):
            self.rebalance_soon()  # queues appeared or went: share them again now
        if any(t not in self.state.routes for t in topics):
            self.state.run_soon_after("routes", MISSING_ROUTE_RETRY, time.monotonic())

    # ------------------------------------------------------------------ rebalance

    async def _rebalance(self) -> None:
        """Take the queues this member should read now; drop the others."""
        if self.manual is not None:
            wanted = set(self.manual)
        else:
            wanted = set()
            for topic in self.subscriptions:
                wanted |= await self._allocate(topic)
        for queue in [q for q in self.assigned if q not in wanted]:
            await self._drop(queue)
        added = [q for q in sorted(wanted) if q not in self.assigned]
        if added and self.settings.orderly:
            locked = await self._lock(added)
            if len(locked) < len(added):  # the member leaving them unlocks them soon
                self.state.run_soon_after("rebalance", LOCK_RETRY, time.monotonic())
            added = [q for q in added if q in locked]
        for queue in added:
            await self._add(queue)

    async def _allocate(self, topic: str) -> set[MessageQueue]:
        route = self.state.routes.get(topic)
        if route is None:
            return {q for q in self.assigned if q.topic == topic}  # keep what we read
        queues = route.subscribe_queues(topic)
        if self.settings.broadcasting:
            return set(queues)
        addrs = [a for _, a in route.broker_addresses()]
        if not addrs:
            return set()
        members: list[str] | None = None
        for addr in addrs:
            try:
                members = await run_trio(consumer_ids(self.state, self.group, addr), self.client)
                break
            except (RemotingError, RocketMQError) as exc:
                log.warning("rocketmq.members_unknown", group=self.group, addr=addr,
                            error=str(exc)[:200])
        if members is None:
            return {q for q in self.assigned if q.topic == topic}
        mine = allocate_averagely(queues, members, self.state.client_id)
        return set(mine)

    async def _add(self, queue: MessageQueue) -> None:
        if self._pulls is None:
            return
        subscription = self._subscription_of(queue)
        try:
            offset = await self._initial_offset(queue)
        except (RemotingError, RocketMQError) as exc:
            log.warning("rocketmq.offset_unknown", group=self.group, queue=str(queue),
                        error=str(exc)[:200])
            return  # the next rebalance tries again
        s = self.settings
        pq = ProcessQueue(max_messages=s.max_cached_messages, max_bytes=s.max_cached_bytes,
                          max_span=s.max_span)
        if s.orderly:
            pq.locked = True
            pq.locked_at = time.monotonic()
        qs = QueueState(queue, subscription, pq, offset)
        self.assigned[queue] = qs
        self.offsets.update(queue, offset, increase_only=False)
        log.info("rocketmq.queue_added", group=self.group, queue=str(queue), offset=offset)
        self._pulls.start_soon(self._pull_task, qs)
        if s.orderly and s.push and self._jobs is not None:
            self._jobs.start_soon(self._orderly_task, qs)

    def _subscription_of(self, queue: MessageQueue) -> Subscription:
        found = self.subscriptions.get(queue.topic)
        return found or Subscription.parse(queue.topic, "*", time.time_ns() // 1_000_000)

    async def _drop(self, queue: MessageQueue) -> None:
        qs = self.assigned.pop(queue, None)
        if qs is None:
            return
        # its held pull is left to end by itself (its answer is then dropped): cancelling it
        # would leave the broker's answer to arrive for no call (response.orphaned)
        if self.settings.orderly:
            with trio.move_on_after(1):  # let a running handler end (Java: tryLock 1 s)
                async with qs.consuming:
                    pass
        qs.pq.dropped = True
        qs.work.set()
        offset = self.offsets.read(queue)
        if offset is not None and not self.settings.broadcasting:
            try:
                await self._store_one(queue, offset)
            except (RemotingError, RocketMQError) as exc:
                log.warning("rocketmq.offset_not_stored", queue=str(queue), error=str(exc)[:200])
        if self.settings.orderly:
            await self._unlock([queue])
        if not self.settings.broadcasting:
            self.offsets.remove(queue)
        log.info("rocketmq.queue_dropped", group=self.group, queue=str(queue), offset=offset)

    async def _initial_offset(self, queue: MessageQueue) -> int:
        """Return where a newly taken queue's pulls start (``computePullFromWhere``)."""
        if self.settings.broadcasting:
            known = self.offsets.read(queue)
            if known is not None:
                return known
            stored = NOT_FOUND
        else:
            addr = self._broker(queue)
            stored = await run_trio(query_offset(addr, self.group, queue), self.client)
            if stored >= 0:
                return stored
        start = self.settings.consume_from
        retry = queue.topic.startswith(RETRY_PREFIX)
        if start == "first" or (start == "last" and retry):
            return 0
        addr = self._broker(queue)
        if start == "last" or retry:
            return await run_trio(queue_offset(addr, Code.GET_MAX_OFFSET, queue), self.client)
        return await run_trio(queue_offset(addr, Code.SEARCH_OFFSET_BY_TIMESTAMP, queue,
                                           int(start)), self.client)

    def _broker(self, queue: MessageQueue) -> str:
        addr = self.state.master(queue.broker_name) or self.state.broker_address(
            queue.broker_name)
        if addr is None:
            raise TopicRouteError(f"no address for broker {queue.broker_name}", queue.topic)
        return addr

    # ------------------------------------------------------------------ pulling

    async def _pull_task(self, qs: QueueState) -> None:
        with qs.scope:
            while not qs.pq.dropped:
                await self._pull_once(qs)

    async def _pull_once(self, qs: QueueState) -> None:
        s = self.settings
        pq = qs.pq
        reason = pq.over_threshold(s.orderly)
        if reason is None and self.buffer is not None and len(self.buffer) > s.poll_buffer_messages:
            reason = "poll_buffer"
        if reason is not None:
            self.statistics.paused += 1
            qs.room = trio.Event()
            with trio.move_on_after(1):
                await qs.room.wait()
            return
        if s.orderly and s.push:
            if not pq.locked or time.monotonic() - pq.locked_at > LOCK_LIFETIME:
                await trio.sleep(PULL_RETRY_DELAY)
                return
            if qs.first_pull:
                try:
                    stored = await run_trio(query_offset(self._broker(qs.queue), self.group,
                                                         qs.queue), self.client)
                except (RemotingError, RocketMQError):
                    await trio.sleep(PULL_RETRY_DELAY)
                    return
                if stored >= 0:
                    qs.next_offset = stored
                qs.first_pull = False
        queue = qs.queue
        try:
            addr = self._broker(queue)
        except TopicRouteError:
            await trio.sleep(PULL_RETRY_DELAY)
            return
        commit = None
        if s.push and not s.broadcasting:
            commit = self.offsets.read(queue)
        generation = qs.generation
        request = pull_request(self.group, queue, qs.next_offset, qs.subscription,
                               max_messages=s.pull_batch, suspend=s.suspend,
                               commit_offset=commit, lite=not s.push)
        try:
            response = await self.client.invoke_sync(addr, request, s.suspend + CALL_MARGIN)
            result = pull_result(response, queue, qs.subscription, addr)
        except (RemotingError, RocketMQError) as exc:
            flow_control = isinstance(exc, MQBrokerError) and exc.code == ResponseCode.FLOW_CONTROL
            qs.failures += 1
            if qs.failures & (qs.failures - 1) == 0:  # the 1st, 2nd, 4th... in a row
                log.warning("rocketmq.pull_failed", queue=str(queue), failures=qs.failures,
                            error=str(exc)[:200])
            await trio.sleep(FLOW_CONTROL_DELAY if flow_control else PULL_RETRY_DELAY)
            return
        qs.failures = 0
        if pq.dropped or generation != qs.generation:
            return
        self.statistics.pulls += 1
        if result.error is not None:
            self.statistics.undecodable += 1
            log.warning("rocketmq.message_undecodable", queue=str(queue),
                        error=str(result.error)[:300], next_offset=result.next_offset)
        if result.status == PullStatus.OFFSET_ILLEGAL:
            log.warning("rocketmq.offset_moved", queue=str(queue), offset=qs.next_offset,
                        next_offset=result.next_offset)
            qs.next_offset = result.next_offset
            pq.clear()
            self.offsets.update(queue, result.next_offset, increase_only=False)
            return
        qs.next_offset = result.next_offset
        messages = result.messages
        if not messages:
            if pq.count == 0 and not pq.has_waiting():  # correctTagsOffset
                self.offsets.update(queue, result.next_offset, increase_only=True)
            return
        pq.put(messages)
        self.statistics.pulled += len(messages)
        if self.buffer is not None:
            self.buffer.put(qs, messages)
        elif s.orderly:
            qs.work.set()
        elif self._jobs is not None:
            self._job_started()
            self._jobs.start_soon(self._consume, qs, messages)

    # ------------------------------------------------------------------ handling

    def _job_started(self) -> None:
        self._running_jobs += 1
        if self._jobs_idle.is_set():
            self._jobs_idle = trio.Event()

    def _job_ended(self) -> None:
        self._running_jobs -= 1
        if self._running_jobs == 0:
            self._jobs_idle.set()

    async def _wait_jobs(self) -> None:
        while self._running_jobs:
            await self._jobs_idle.wait()

    async def _handle(self, messages: list[Message]) -> list[Message]:
        """Run the handler on each of ``messages``; return those whose handler raised."""
        handler = self._handler
        assert handler is not None
        if self._async_handler:
            failed: list[Message] = []
            for message in messages:
                try:
                    with self._processing(message):
                        await handler(message)  # type: ignore[misc]
                except Exception as exc:
                    self._handler_failed(message, exc)
                    failed.append(message)
            return failed
        # abandoned if shutdown gives up on it (a handler stuck past shutdown_timeout): its
        # thread finishes alone, its messages' offsets are not committed (delivered again)
        return await trio.to_thread.run_sync(self._handle_in_thread, handler, messages,
                                             limiter=self._limiter, abandon_on_cancel=True,
                                             thread_name=f"rocketmq-handler-{self.group}")

    def _handle_in_thread(self, handler: Handler, messages: list[Message]) -> list[Message]:
        failed: list[Message] = []
        telemetry = self._telemetry
        for message in messages:
            try:
                if telemetry is None:
                    handler(message)
                else:
                    with telemetry.processing(message, self.group):
                        handler(message)
            except BaseException as exc:  # SystemExit too: a handler's failure, not ours
                self._handler_failed(message, exc)
                failed.append(message)
        return failed

    def _processing(self, message: Message) -> Any:
        if self._telemetry is None:
            return NO_SPAN
        return self._telemetry.processing(message, self.group)

    def _handler_failed(self, message: Message, exc: BaseException) -> None:
        counters = self.statistics
        counters.failed += 1
        n = counters.failed
        if n & (n - 1) == 0:  # the 1st, 2nd, 4th...: a failing handler cannot flood the log
            log.warning("rocketmq.handler_failed", group=self.group, msg_id=message.msg_id,
                        topic=message.topic, reconsume_times=message.reconsume_times,
                        failures=n, exc_info=exc)

    async def _consume(self, qs: QueueState, messages: list[Message]) -> None:
        try:
            pending = messages
            while pending:
                failed = await self._handle(pending)
                done = [m for m in pending if m not in failed] if failed else pending
                retry_later: list[Message] = []
                if failed and not self.settings.broadcasting:
                    for message in failed:
                        if not await self._send_back(message, self.settings.retry_delay_level):
                            retry_later.append(message)
                    done = [m for m in pending if m not in retry_later]
                self.statistics.consumed += len(pending) - len(failed)
                if self._telemetry is not None:
                    self._telemetry.consumed(qs.queue.topic, self.group, len(pending),
                                             len(failed))
                offset = qs.pq.remove(done)
                if not qs.pq.dropped and offset >= 0:
                    self.offsets.update(qs.queue, offset)
                qs.room.set()
                pending = retry_later
                if pending:
                    await trio.sleep(SEND_BACK_RETRY_DELAY)
                    if qs.pq.dropped:
                        return
        finally:
            self._job_ended()

    async def _send_back(self, message: Message, delay_level: int) -> bool:
        """Send a failed message back to the broker's retry topic; return whether it took it."""
        try:
            addr = self._broker(message.queue)  # the broker that stored it (Java: storeHost)
            request = send_back_request(
                group=self.group, commit_log_offset=message.commit_log_offset,
                delay_level=delay_level, origin_msg_id=message.msg_id,
                origin_topic=message.topic,
                max_reconsume_times=self._max_reconsume_times())
            response = await self.client.invoke_sync(addr, request, 3.0)
        except (RemotingError, RocketMQError) as exc:
            log.warning("rocketmq.send_back_failed", msg_id=message.msg_id, error=str(exc)[:200])
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning("rocketmq.send_back_failed", msg_id=message.msg_id, code=response.code,
                        remark=(response.remark or "")[:200])
            return False
        self.statistics.sent_back += 1
        return True

    def _max_reconsume_times(self) -> int:
        m = self.settings.max_reconsume_times
        return m if m >= 0 else 2**31 - 1

    # ------------------------------------------------------------------ orderly

    async def _orderly_task(self, qs: QueueState) -> None:
        self._job_started()
        try:
            while not qs.pq.dropped and not self._stopping:
                if not qs.pq.has_waiting():
                    qs.work = trio.Event()
                    if qs.pq.dropped or self._stopping:
                        return
                    await qs.work.wait()
                    continue
                if not qs.pq.locked or time.monotonic() - qs.pq.locked_at > LOCK_LIFETIME:
                    await trio.sleep(ORDERLY_RETRY_DELAY)
                    continue
                async with qs.consuming:
                    if qs.pq.dropped:
                        return
                    taken = qs.pq.take(1)
                    failed = await self._handle(taken)
                    if failed:
                        message = failed[0]
                        if message.reconsume_times + 1 >= self._max_reconsume_times():
                            if await self._send_back(message, -1):  # to the DLQ at once
                                failed = []
                        if failed:
                            message.reconsume_times += 1
                            qs.pq.retry(taken)
                    if not failed:
                        self.statistics.consumed += len(taken)
                        offset = qs.pq.commit()
                        if offset >= 0 and not qs.pq.dropped:
                            self.offsets.update(qs.queue, offset)
                        qs.room.set()
                if failed:
                    await trio.sleep(ORDERLY_RETRY_DELAY)
        finally:
            self._job_ended()

    async def _lock(self, queues: list[MessageQueue]) -> set[MessageQueue]:
        locked: set[MessageQueue] = set()
        for broker, mine in _by_broker(queues).items():
            addr = self.state.master(broker)
            if addr is None:
                continue
            try:
                locked |= await run_trio(lock_queues(addr, self.group, self.state.client_id,
                                                     mine), self.client)
            except (RemotingError, RocketMQError) as exc:
                log.warning("rocketmq.lock_failed", broker=broker, error=str(exc)[:200])
        return locked

    async def _unlock(self, queues: list[MessageQueue]) -> None:
        for broker, mine in _by_broker(queues).items():
            addr = self.state.master(broker)
            if addr is not None:
                await run_trio(unlock_queues(addr, self.group, self.state.client_id, mine),
                               self.client)

    async def _renew_locks(self) -> None:
        queues = list(self.assigned)
        if not queues:
            return
        locked = await self._lock(queues)
        now = time.monotonic()
        for queue, qs in list(self.assigned.items()):
            if queue in locked:
                qs.pq.locked = True
                qs.pq.locked_at = now
            else:
                qs.pq.locked = False
                qs.first_pull = True  # another member may have moved its offset

    # ------------------------------------------------------------------ offsets

    async def _store_one(self, queue: MessageQueue, offset: int) -> None:
        await run_trio(update_offset(self._broker(queue), self.group, queue, offset),
                       self.client)
        self.offsets.stored(queue, offset)

    async def store_offsets(self) -> None:
        """Store every changed offset: on the brokers, or in the offsets file."""
        changed = self.offsets.changed()
        if not changed:
            return
        if self._offsets_file is not None:
            items = self.offsets.items()
            await trio.to_thread.run_sync(dump_file, self._offsets_file, items)
            for queue, offset in items:
                self.offsets.stored(queue, offset)
            return
        failure: BaseException | None = None
        for queue, offset in changed:
            if queue not in self.assigned and self.manual is None:
                continue
            try:
                await self._store_one(queue, offset)
            except (RemotingError, RocketMQError) as exc:
                failure = exc
                log.warning("rocketmq.offset_not_stored", queue=str(queue), error=str(exc)[:200])
        if failure is not None:
            raise failure

    # ------------------------------------------------------------------ lite pull

    def polled(self, taken: list[tuple[QueueState, list[Message]]]) -> None:
        """Move the offsets past messages ``poll`` returned (on the loop)."""
        for qs, messages in taken:
            offset = qs.pq.remove(messages)
            if not qs.pq.dropped and offset >= 0:
                self.offsets.update(qs.queue, offset)
            qs.room.set()

    async def assign(self, queues: list[MessageQueue]) -> None:
        """Read exactly ``queues`` from now on (lite pull's assign mode)."""
        self.manual = list(queues)
        await self._refresh_routes()
        await self._rebalance()

    async def seek(self, queue: MessageQueue, offset: int) -> None:
        """Read ``queue`` from ``offset`` next (messages pulled before are dropped)."""
        qs = self.assigned.get(queue)
        if qs is None:
            raise ValueError(f"{queue} is not assigned to this consumer: assign() it, or seek "
                             "a queue of assignment()")
        qs.generation += 1
        qs.pq.clear()
        qs.scope.cancel()
        qs.next_offset = offset
        self.offsets.update(queue, offset, increase_only=False)
        fresh = QueueState(queue, qs.subscription, qs.pq, offset, generation=qs.generation)
        self.assigned[queue] = fresh
        if self._pulls is not None:
            self._pulls.start_soon(self._pull_task, fresh)

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """Return ``topic``'s readable queues (looking its route up)."""
        route = self.state.routes.get(topic)
        if route is None:
            await run_trio(refresh_routes(self.state, [topic], producer=False), self.client)
            route = self.state.routes.get(topic)
        if route is None:
            raise TopicRouteError(f"no route for topic {topic!r}", topic)
        return route.subscribe_queues(topic)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerStatistics:
    """A consumer's counters since it started, and the queues it reads now."""

    client_id: str
    queues: tuple[MessageQueue, ...]
    pulls: int
    pulled: int
    consumed: int
    failed: int
    sent_back: int
    paused: int
    undecodable: int
    offsets: dict[MessageQueue, int]


def statistics_of(engine: Engine) -> ConsumerStatistics:
    """Return ``engine``'s statistics (on its loop)."""
    c = engine.statistics
    return ConsumerStatistics(
        client_id=engine.state.client_id, queues=tuple(sorted(engine.assigned)),
        pulls=c.pulls, pulled=c.pulled, consumed=c.consumed, failed=c.failed,
        sent_back=c.sent_back, paused=c.paused, undecodable=c.undecodable,
        offsets=dict(engine.offsets.items()))


@dataclass(slots=True)
class ConsumerCounters:
    """What a consumer counted since it started."""

    pulls: int = 0
    pulled: int = 0
    consumed: int = 0
    failed: int = 0
    sent_back: int = 0
    paused: int = 0
    undecodable: int = 0


def _by_broker(queues: list[MessageQueue]) -> dict[str, list[MessageQueue]]:
    out: dict[str, list[MessageQueue]] = {}
    for q in queues:
        out.setdefault(q.broker_name, []).append(q)
    return out

