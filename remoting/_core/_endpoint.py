"""`Endpoint`: the trio core shared by client and server (RocketMQ's NettyRemotingAbstract).

Theory of operation:
- Everything here runs on the endpoint's trio thread. Other threads reach it through
  ``inbox.post`` (batched ``run_sync_soon``): calls from threads and results from pools. Two
  exceptions, both under a connection's write lock: a blocking ``invoke_sync`` on an idle
  connection registers and sends from its own thread (`_thread_calls`), and a pool thread
  writes a lone response itself (its bookkeeping still comes through the inbox).
- Sending is synchronous once a connection and a permit are in hand (`Invoker.send`), so the
  blocking facade needs at most one hand-off per call and no task on its fast path.
- Async processors run in the reader of their connection (`handle_command`); one that
  suspends is finished by that task (`finish_suspended`) while a new task reads on.
- Each pending request completes exactly once: whoever pops it from the `ResponseTable`
  (response, deadline timer, scanner, connection loss, send failure, shutdown) completes it.
- Deadlines: the timer task sleeps until the earliest deadline in the table and expires what is
  due; the scanner (RocketMQ's scanResponseTable, with its grace) sweeps as a safety net.
- Graceful shutdown: `begin_shutdown` makes new requests get GO_AWAY; `wait_processing_done`
  lets running processors finish; cancelling `run` then fails whatever is still pending.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextvars import Context, copy_context
from functools import partial
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, Literal

import trio

from codec import LanguageCode, RemotingCommand, ResponseCode, encode_frame_parts
from processors import AsyncRequestProcessor, RequestProcessor

from .._config import ClientConfig
from .._log import log
from .._observability._histogram import LatencyHistogram
from .._observability._statistics import EndpointStatistics
from .._security._tls import client_context
from ._channel_table import ChannelTable
from ._dispatch import (
    GO_AWAY_REMARK,
    OVERLOAD_REMARK,
    REJECT_REMARK,
    ProcessorEntry,
    error_reply,
    not_supported_remark,
    overrides_reject,
    resume_suspended,
    run_async_request,
    run_sync_request,
)
from ._events import EventDispatcher
from ._invoke import Invoker
from ._pool import THREAD_JOIN_SECONDS, ExecutorPool, LoopInbox, ProcessorPool
from ._response_table import ResponseTable

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterable

    from codec import EncodedFrame

    from .._config import ServerConfig
    from .._hooks import RPCHook
    from ._connection import Connection
    from ._events import ChannelEventListener

__all__ = ["Endpoint"]

GO_AWAY_MIN_VERSION: Final = 475  # RocketMQ V5_3_1: later Java clients understand GO_AWAY
Suspended = tuple["Coroutine[Any, Any, EncodedFrame | None]", object, Context]
_GO_AWAY: Final = int(ResponseCode.GO_AWAY)  # a plain int compares faster than the enum


class _InlineExecutor(Executor):
    """Runs a callback at once in the calling thread (used once the endpoint has stopped)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


_INLINE: Final = _InlineExecutor()
_OWN_THREAD = threading.local()  # .endpoint: whose processors or callbacks this thread runs


def _mark_own_thread(endpoint: Endpoint) -> None:
    _OWN_THREAD.endpoint = endpoint


class Endpoint(ChannelTable, Invoker):
    """The trio core of a client or a server."""

    def __init__(self, config: ClientConfig | ServerConfig, role: Literal["client", "server"]):
        self.config = config
        self.role = role
        if isinstance(config, ClientConfig):
            async_permits = config.client_async_semaphore_value
            oneway_permits = config.client_oneway_semaphore_value
            self.go_away_retry = config.enable_reconnect_for_go_away
            self.close_on_sync_timeout = config.close_socket_if_timeout
            self.tls_context = client_context(config)
        else:
            async_permits = config.server_async_semaphore_value
            oneway_permits = config.server_oneway_semaphore_value
            self.go_away_retry = False
            self.close_on_sync_timeout = False
            self.tls_context = None
        self.async_permits = trio.Semaphore(async_permits, max_value=async_permits)
        self.oneway_permits = trio.Semaphore(oneway_permits, max_value=oneway_permits)
        self.processors: dict[int, ProcessorEntry] = {}
        self.default_entry: ProcessorEntry | None = None
        self.hooks: list[RPCHook] = []
        self.table = ResponseTable()
        self.connections: set[Connection] = set()
        self._init_channel_table()
        self._inbox = LoopInbox(None)  # type: ignore[arg-type]  # token set in run()
        self.events = EventDispatcher(f"remoting-{role}-events")
        self.loop_thread_id: int | None = None
        self.running = False
        self.closed = False
        self.shutting_down = False
        self.processing = 0  # requests handed to processors and not finished
        self._processing_done: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self._timer_scope: trio.CancelScope | None = None
        self._callback_executor: ThreadPoolExecutor | None = None
        self._callback_lock = threading.Lock()
        self._callbacks_closed = False
        self._pools: list[ProcessorPool | ExecutorPool] = []
        self._pools_to_flush: list[ProcessorPool] = []
        self._sent: dict[int, int] = {}
        self._sent_from_threads: dict[int, int] = {}  # by _thread_calls, under the lock below
        self._sent_lock = threading.Lock()
        self.clock: trio.abc.Clock | None = None  # the loop's clock, readable from any thread
        self._received: dict[int, int] = {}
        self._error_replies: dict[int, int] = {}
        self._latency: dict[int, LatencyHistogram] = {}
        self._timeouts = 0
        self._orphans = 0
        self._connections_opened = 0

    @property
    def inbox(self) -> LoopInbox:
        """The hand-off into the trio thread."""
        return self._inbox

    # ------------------------------------------------------------------ registration

    def register_processor(
        self,
        code: int | None,
        processor: RequestProcessor | AsyncRequestProcessor,
        executor: Executor | None = None,
        threads: int | None = None,
    ) -> None:
        """Register ``processor`` for ``code`` (None: the default processor)."""
        if isinstance(processor, AsyncRequestProcessor):
            if executor is not None:
                raise ValueError("an AsyncRequestProcessor runs on the event loop: no executor")
            entry = ProcessorEntry(processor=processor, pool=None, is_async=True,
                                   may_reject=overrides_reject(processor))
        elif isinstance(processor, RequestProcessor):
            name = f"remoting-{self.role}-{'default' if code is None else code}"
            pool: ProcessorPool | ExecutorPool
            if executor is not None:
                pool = ExecutorPool(name, executor, self._inbox)
            else:
                pool = ProcessorPool(
                    name, threads or self.config.default_processor_threads,
                    self.config.processor_queue_capacity, self._inbox,
                    self._pools_to_flush.append, partial(_mark_own_thread, self),
                )
            self._pools.append(pool)
            entry = ProcessorEntry(processor=processor, pool=pool, is_async=False,
                                   may_reject=overrides_reject(processor))
        else:
            raise TypeError(
                "processor must subclass processors.RequestProcessor or AsyncRequestProcessor"
            )
        if code is None:
            self.default_entry = entry
        else:
            self.processors[code] = entry

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Add a hook (once); hooks run in registration order."""
        if hook not in self.hooks:
            self.hooks.append(hook)

    def register_channel_event_listener(self, listener: ChannelEventListener) -> None:
        """Deliver connection events to ``listener`` (on the event thread)."""
        self.events.add(listener)

    def get_callback_executor(self) -> Executor:
        """Return the executor that runs user callbacks (created on first use; after shutdown,
        one that runs them at once in the calling thread, as the loop is gone)."""
        executor = self._callback_executor
        if executor is None:
            with self._callback_lock:
                if self._callbacks_closed:
                    return _INLINE
                if self._callback_executor is None:
                    self._callback_executor = ThreadPoolExecutor(
                        self.config.callback_threads(),
                        thread_name_prefix=f"remoting-{self.role}-callback",
                        initializer=_mark_own_thread, initargs=(self,),
                    )
                executor = self._callback_executor
        return executor

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the core until cancelled; on exit every pending request has failed."""
        self._inbox._token = trio.lowlevel.current_trio_token()
        self.loop_thread_id = threading.get_ident()
        self.clock = trio.lowlevel.current_clock()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self.config.precise_timeouts:
                    nursery.start_soon(self._timer)
                nursery.start_soon(self._scanner)
                if self.config.max_idle_seconds > 0:
                    nursery.start_soon(self._idle_scanner)
                self.running = True
                task_status.started()
                await trio.sleep_forever()
        finally:
            self.running = False
            self.closed = True
            for fut in self.table.pop_all():
                fut._fail_send(f"{self.role} shut down")
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._join_threads)

    def _join_threads(self) -> None:
        for pool in self._pools:  # every pool's threads wind down at once, one deadline
            pool.stop()
        deadline = monotonic() + THREAD_JOIN_SECONDS
        left = [name for pool in self._pools for name in pool.join(deadline)]
        if left:
            log.warning("pool.threads_left_running", threads=left, seconds=THREAD_JOIN_SECONDS,
                        reason="processors still running at shutdown (daemon threads)")
        self.events.close()
        self.close_callback_executor()

    def in_own_thread(self) -> bool:
        """True in a thread of this endpoint's processor pools or callback executor (threads
        that its shutdown joins, so a shutdown called there must not wait for them)."""
        return getattr(_OWN_THREAD, "endpoint", None) is self

    def close_callback_executor(self, final: bool = True) -> None:
        """Run the callbacks still queued, then stop their threads.

        With ``final=False`` (tests) a new executor is made on next use; otherwise later
        callbacks run at once in the thread that completes or registers them.
        """
        with self._callback_lock:
            executor, self._callback_executor = self._callback_executor, None
            self._callbacks_closed = final
        if executor is not None:
            executor.shutdown(wait=True)

    def begin_shutdown(self) -> None:
        """Answer GO_AWAY to new requests from here on (graceful shutdown)."""
        self.shutting_down = True

    async def wait_processing_done(self, grace: float) -> bool:
        """Wait up to ``grace`` seconds for running processors and for their responses to
        reach the sockets; True if all finished."""
        with trio.move_on_after(grace):
            while self.processing:
                self._processing_done = trio.Event()
                await self._processing_done.wait()
            for conn in list(self.connections):
                await conn.wait_flushed()
            return True
        return False

    def connection_opened(self, conn: Connection) -> None:
        """Track a new connection."""
        self.connections.add(conn)
        self._connections_opened += 1
        log.info("connection.opened", conn_id=conn.id, peer=conn.remote_addr, role=self.role)
        self.events.emit("connect", conn.remote_addr, conn.channel)

    def connection_closed(self, conn: Connection, broken: bool) -> None:
        """Forget ``conn`` and fail its pending requests at once (RocketMQ failFast)."""
        self.connections.discard(conn)
        self.forget_channel(conn)
        for fut in self.table.pop_connection(conn):
            fut._fail_send(f"connection closed ({conn.close_reason})")
        if broken:
            self.events.emit("exception", conn.remote_addr, conn.channel)
        self.events.emit("close", conn.remote_addr, conn.channel)

    # ------------------------------------------------------------------ timers

    async def _timer(self) -> None:
        while True:
            deadline = self.table.next_deadline()
            with trio.CancelScope(deadline=math.inf if deadline is None else deadline) as scope:
                self._timer_scope = scope
                await trio.sleep_forever()
            self._timer_scope = None
            self._expire(trio.current_time())

    def _arm_timer(self, deadline: float) -> None:
        scope = self._timer_scope
        if scope is not None and deadline < scope.deadline:
            scope.deadline = deadline

    async def _scanner(self) -> None:
        cfg = self.config
        await trio.sleep(cfg.scan_initial_delay)
        while True:
            self._expire(trio.current_time() - cfg.scan_grace)
            await trio.sleep(cfg.scan_period)

    def _expire(self, now: float) -> None:
        for fut in self.table.expire(now):
            self._timeouts += 1
            log.warning("request.timed_out", opaque=fut.opaque, addr=fut.addr,
                        timeout=fut.timeout)
            fut._fail_timeout()
            if fut.close_on_timeout and fut.conn is not None:
                fut.conn.close("invoke_sync timed out (close_socket_if_timeout)")

    async def _idle_scanner(self) -> None:
        idle = self.config.max_idle_seconds
        while True:
            await trio.sleep(max(0.01, idle / 10))
            limit = trio.current_time() - idle
            for conn in [c for c in self.connections if c.last_activity <= limit]:
                log.info("connection.idle", conn_id=conn.id, peer=conn.remote_addr,
                         idle_seconds=idle)
                self.events.emit("idle", conn.remote_addr, conn.channel)
                conn.close(f"idle for {idle}s")

    # ------------------------------------------------------------------ receiving

    def handle_command(self, conn: Connection, cmd: RemotingCommand) -> Suspended | None:
        """Route one received command (reader task, sync).

        Returns None, or an async processor that suspended in its first step: the calling
        task must then ``await finish_suspended(conn, *suspended)`` at once.
        """
        if cmd.flag & 1:
            self._handle_response(conn, cmd)
            return None
        code = cmd.code
        self._received[code] = self._received.get(code, 0) + 1
        entry = self.processors.get(code) or self.default_entry
        if entry is None:
            self._reply_error(conn, cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                              not_supported_remark(code))
            return None
        if self.shutting_down and (cmd.version > GO_AWAY_MIN_VERSION
                                   or cmd.language is LanguageCode.PYTHON):
            self._reply_error(conn, cmd, ResponseCode.GO_AWAY, GO_AWAY_REMARK)
            return None
        processor = entry.processor
        if entry.may_reject:
            try:
                rejected = processor.reject_request()
            except Exception:
                log.error("processor.failed", code=code, during="reject_request", exc_info=True)
                rejected = False
            if rejected:
                log.debug("processor.rejected", code=code, opaque=cmd.opaque)
                self._reply_error(conn, cmd, ResponseCode.SYSTEM_BUSY, REJECT_REMARK)
                return None
        if entry.is_async:
            # Run it right here, in the reader; most processors finish without suspending.
            self.processing += 1
            conn.processing += 1
            # A fresh context per request, as on the pools: bindings never leak between them.
            context = copy_context()
            coro = run_async_request(processor, conn.ctx, cmd, self.hooks)  # type: ignore[arg-type]
            try:
                trap = context.run(coro.send, None)
            except StopIteration as finished:
                self._processed(conn, finished.value)
                return None
            except BaseException:
                self._processed(conn, None)
                raise
            return coro, trap, context  # it suspended: the reader finishes it (Connection._reader)
        assert entry.pool is not None
        if entry.pool.try_submit(
            run_sync_request, (processor, conn.ctx, cmd, self.hooks), conn.processed,
            conn.send_response_from_thread,
        ):
            self.processing += 1
            conn.processing += 1
        else:
            log.warning("processor.overloaded", code=code, pool=entry.pool.name)
            self._reply_error(conn, cmd, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        return None

    def flush_dispatch(self) -> None:
        """Hand the requests recorded since the last flush to their pools (reader, per read)."""
        pools = self._pools_to_flush
        if pools:
            for pool in pools:
                pool.flush()
            pools.clear()

    def _handle_response(self, conn: Connection, cmd: RemotingCommand) -> None:
        fut = self.table.pop_for(cmd.opaque, conn)
        if fut is None:
            self._orphans += 1
            log.warning("response.orphaned", opaque=cmd.opaque, code=cmd.code,
                        peer=conn.remote_addr)
            return
        if cmd.code == _GO_AWAY and self.on_go_away(fut, conn):
            return
        code = fut.request.code
        hist = self._latency.get(code)
        if hist is None:
            hist = self._latency[code] = LatencyHistogram()
        # received at the time of the read that brought it (saves a clock call per response)
        hist.record(conn.last_activity - (fut.deadline - fut.timeout))
        fut._complete(cmd)

    def _processed(self, conn: Connection, frame: EncodedFrame | None) -> None:
        self.processing -= 1
        conn.processing_done()
        if frame is None:
            conn.kick_writer()  # a pool thread may have queued the rest of a response
        else:
            conn.write_response_frame(frame)
        if not self.processing and self._processing_done is not None:
            self._processing_done.set()

    def _reply_error(self, conn: Connection, cmd: RemotingCommand, code: int, remark: str) -> None:
        self._error_replies[cmd.code] = self._error_replies.get(cmd.code, 0) + 1
        conn.write_response_frame(error_reply(cmd, code, remark))

    async def finish_suspended(self, conn: Connection,
                               coro: Coroutine[Any, Any, EncodedFrame | None],
                               trap: object, context: Context) -> None:
        """Finish an async processor that suspended in its first step (in the task that ran
        that step, which owns it), then send its response."""
        frame = None
        try:
            frame = await resume_suspended(coro, trap, context)
        finally:
            self._processed(conn, frame)

    # ------------------------------------------------------------------ server push

    def broadcast_oneway(self, conns: Iterable[Connection], request: RemotingCommand) -> int:
        """Queue one oneway ``request`` on each live connection; return how many got it.

        The frame is encoded once. Connections over their high water mark are skipped (a
        slow consumer cannot stall the others) and logged.
        """
        request.flag |= 2
        frame = encode_frame_parts(request)
        sent = 0
        for conn in conns:
            if conn.closed:
                continue
            if conn.queued_bytes > conn.high_water:
                log.warning("broadcast.skipped", conn_id=conn.id, peer=conn.remote_addr,
                            queued_bytes=conn.queued_bytes)
                continue
            if conn.write_frame(frame):
                sent += 1
        self._sent[request.code] = self._sent.get(request.code, 0) + sent
        return sent

    # ------------------------------------------------------------------ statistics

    def count_sent_from_thread(self, code: int) -> None:
        """Count a request sent by a caller's thread (`_thread_calls`); any thread."""
        with self._sent_lock:
            self._sent_from_threads[code] = self._sent_from_threads.get(code, 0) + 1

    def _requests_sent(self) -> dict[int, int]:
        sent = dict(self._sent)
        with self._sent_lock:
            for code, n in self._sent_from_threads.items():
                sent[code] = sent.get(code, 0) + n
        return sent

    def statistics(self) -> EndpointStatistics:
        """Return a snapshot of the counters (trio thread, or tolerate slight tearing)."""
        queue: dict[int, int] = {
            code: entry.pool.in_pool
            for code, entry in list(self.processors.items()) if entry.pool is not None
        }
        return EndpointStatistics(
            connections=len(self.connections),
            connections_opened=self._connections_opened,
            in_flight=len(self.table),
            requests_sent=self._requests_sent(),
            requests_received=dict(self._received),
            error_replies=dict(self._error_replies),
            timeouts=self._timeouts,
            orphaned_responses=self._orphans,
            processor_queue=queue,
            latency={code: h.summary() for code, h in list(self._latency.items())},
            dropped_events=self.events.dropped,
        )

