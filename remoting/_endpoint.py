"""`Endpoint`: the trio core shared by client and server (RocketMQ's NettyRemotingAbstract).

Theory of operation:
- Everything here runs on the endpoint's trio thread. Other threads reach it only through
  ``inbox.post`` (batched ``run_sync_soon``), e.g. `submit_from_thread` and pool results.
- Sending a request is synchronous once a connection and a permit are in hand (`_send`):
  encode, register in the `ResponseTable`, queue the frame. So the blocking facade needs one
  hand-off per call and no task; only the slow path (connect, wait for a permit) spawns a task.
- Each pending request completes exactly once: whoever pops it from the table (response,
  deadline timer, scanner, connection loss, send failure, shutdown) completes it.
- Deadlines: the timer task sleeps until the earliest deadline in the table and expires what is
  due; the scanner (RocketMQ's scanResponseTable, with grace) sweeps as a safety net.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import trio

from codec import CodecError, RemotingCommand, ResponseCode, encode_frame, next_opaque
from processors import AsyncRequestProcessor, RequestProcessor

from ._connection import Connection
from ._dispatch import (
    OVERLOAD_REMARK,
    REJECT_REMARK,
    ProcessorEntry,
    error_reply,
    not_supported_remark,
    run_async_request,
    run_sync_request,
)
from ._errors import (
    RemotingCommandError,
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)
from ._future import ResponseFuture
from ._log import log
from ._pool import ExecutorPool, LoopInbox, ProcessorPool
from ._response_table import ResponseTable
from ._statistics import EndpointStatistics

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from concurrent.futures import Executor

    from ._config import ClientConfig, ServerConfig
    from ._hooks import RPCHook

__all__ = ["Endpoint", "InvokeKind", "parse_addr"]

InvokeKind = Literal["sync", "async", "oneway"]


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``) at the last colon.

    Raises:
        RemotingConnectError: the address is not of that form.
    """
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RemotingConnectError(addr, "address must be 'host:port'")
    return host.strip("[]"), int(port)


class _PendingConnect:
    __slots__ = ("conn", "event", "reason")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.conn: Connection | None = None
        self.reason = ""


class Endpoint:
    """The trio core of a client or a server."""

    def __init__(self, config: ClientConfig | ServerConfig, role: Literal["client", "server"]):
        from ._config import ServerConfig

        self.config = config
        self.role = role
        if isinstance(config, ServerConfig):
            async_permits = config.server_async_semaphore_value
            oneway_permits = config.server_oneway_semaphore_value
        else:
            async_permits = config.client_async_semaphore_value
            oneway_permits = config.client_oneway_semaphore_value
        self.async_permits = trio.Semaphore(async_permits, max_value=async_permits)
        self.oneway_permits = trio.Semaphore(oneway_permits, max_value=oneway_permits)
        self.processors: dict[int, ProcessorEntry] = {}
        self.default_entry: ProcessorEntry | None = None
        self.hooks: list[RPCHook] = []
        self.table = ResponseTable()
        self.connections: set[Connection] = set()
        self.channels: dict[str, Connection] = {}
        self._connecting: dict[str, _PendingConnect] = {}
        self.inbox = LoopInbox(None)  # type: ignore[arg-type]  # token set in run()
        self.loop_thread_id: int | None = None
        self.running = False
        self.closed = False
        self._nursery: trio.Nursery | None = None
        self._timer_scope: trio.CancelScope | None = None
        self._callback_executor: ThreadPoolExecutor | None = None
        self._callback_lock = threading.Lock()
        self._pools: list[ProcessorPool | ExecutorPool] = []
        self._sent: dict[int, int] = {}
        self._received: dict[int, int] = {}
        self._error_replies: dict[int, int] = {}
        self._timeouts = 0
        self._orphans = 0

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
            entry = ProcessorEntry(processor=processor, pool=None, is_async=True)
        elif isinstance(processor, RequestProcessor):
            name = f"remoting-{self.role}-{'default' if code is None else code}"
            pool: ProcessorPool | ExecutorPool
            if executor is not None:
                pool = ExecutorPool(name, executor, self.inbox)
            else:
                pool = ProcessorPool(
                    name, threads or self.config.default_processor_threads,
                    self.config.processor_queue_capacity, self.inbox,
                )
            self._pools.append(pool)
            entry = ProcessorEntry(processor=processor, pool=pool, is_async=False)
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

    def get_callback_executor(self) -> Executor:
        """Return the executor that runs user callbacks (created on first use)."""
        executor = self._callback_executor
        if executor is None:
            with self._callback_lock:
                if self._callback_executor is None:
                    self._callback_executor = ThreadPoolExecutor(
                        self.config.callback_threads(),
                        thread_name_prefix=f"remoting-{self.role}-callback",
                    )
                executor = self._callback_executor
        return executor

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the core until cancelled; on exit every pending request has failed."""
        token = trio.lowlevel.current_trio_token()
        self.inbox._token = token
        self.loop_thread_id = threading.get_ident()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self.config.precise_timeouts:
                    nursery.start_soon(self._timer)
                nursery.start_soon(self._scanner)
                self.running = True
                task_status.started()
                await trio.sleep_forever()
        finally:
            self.running = False
            self.closed = True
            for fut in self.table.pop_all():
                fut._fail_send(f"{self.role} shut down")
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._close_pools)

    def _close_pools(self) -> None:
        for pool in self._pools:
            pool.close()

    def close_callback_executor(self) -> None:
        """Run the callbacks still queued, then stop their threads (call after `run` ended)."""
        executor, self._callback_executor = self._callback_executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def connection_opened(self, conn: Connection) -> None:
        """Track a new connection."""
        self.connections.add(conn)
        log.info("connection.opened", conn_id=conn.id, peer=conn.remote_addr, role=self.role)

    def connection_closed(self, conn: Connection) -> None:
        """Forget ``conn`` and fail its pending requests at once."""
        self.connections.discard(conn)
        if conn.addr_key is not None and self.channels.get(conn.addr_key) is conn:
            del self.channels[conn.addr_key]
        failed = self.table.pop_connection(conn)
        for fut in failed:
            fut._fail_send(f"connection closed ({conn.close_reason})")

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

    # ------------------------------------------------------------------ receiving

    def handle_command(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Route one received command (reader task, sync)."""
        if cmd.flag & 1:
            fut = self.table.pop_for(cmd.opaque, conn)
            if fut is None:
                self._orphans += 1
                log.warning("response.orphaned", opaque=cmd.opaque, code=cmd.code,
                            peer=conn.remote_addr)
                return
            fut._complete(cmd)
            return
        code = cmd.code
        self._received[code] = self._received.get(code, 0) + 1
        entry = self.processors.get(code) or self.default_entry
        if entry is None:
            self._reply_error(conn, cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                              not_supported_remark(code))
            return
        processor = entry.processor
        try:
            rejected = processor.reject_request()
        except Exception:
            log.error("processor.failed", code=code, during="reject_request", exc_info=True)
            rejected = False
        if rejected:
            log.debug("processor.rejected", code=code, opaque=cmd.opaque)
            self._reply_error(conn, cmd, ResponseCode.SYSTEM_BUSY, REJECT_REMARK)
            return
        if isinstance(processor, AsyncRequestProcessor):
            assert self._nursery is not None
            self._nursery.start_soon(self._run_async, conn, processor, cmd)
            return
        assert entry.pool is not None
        if not entry.pool.try_submit(
            run_sync_request, (processor, conn.ctx, cmd, self.hooks), conn.write_response_frame
        ):
            log.warning("processor.overloaded", code=code, pool=entry.pool.name)
            self._reply_error(conn, cmd, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)

    def _reply_error(self, conn: Connection, cmd: RemotingCommand, code: int, remark: str) -> None:
        self._error_replies[cmd.code] = self._error_replies.get(cmd.code, 0) + 1
        conn.write_response_frame(error_reply(cmd, code, remark))

    async def _run_async(
        self, conn: Connection, processor: AsyncRequestProcessor, cmd: RemotingCommand
    ) -> None:
        frame = await run_async_request(processor, conn.ctx, cmd, self.hooks)
        conn.write_response_frame(frame)

    # ------------------------------------------------------------------ connections

    async def get_connection(self, addr: str, deadline: float, timeout: float) -> Connection:
        """Return the live connection to ``addr``, connecting once for concurrent callers.

        Raises:
            RemotingConnectError: the connect failed or timed out.
            RemotingTimeoutError: the call's deadline passed while connecting.
        """
        conn = self.channels.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._nursery is None or self.closed:
            raise RemotingError(f"the {self.role} is not running", addr)
        pending = self._connecting.get(addr)
        if pending is None:
            host, port = parse_addr(addr)
            pending = _PendingConnect()
            self._connecting[addr] = pending
            self._nursery.start_soon(self._connect, addr, host, port, pending)
        with trio.move_on_at(deadline):
            await pending.event.wait()
        if not pending.event.is_set():
            raise RemotingTimeoutError(addr, timeout, "connect")
        if pending.conn is None:
            raise RemotingConnectError(addr, pending.reason)
        return pending.conn

    async def _connect(self, addr: str, host: str, port: int, pending: _PendingConnect) -> None:
        try:
            with trio.fail_after(self.config.connect_timeout):  # type: ignore[union-attr]
                stream = await trio.open_tcp_stream(host, port)
        except trio.TooSlowError:
            pending.reason = f"no answer within {self.config.connect_timeout}s"  # type: ignore[union-attr]
        except OSError as exc:
            pending.reason = exc.strerror or repr(exc)
        else:
            conn = Connection(self, stream, addr, addr_key=addr)
            self.channels[addr] = conn
            self.connection_opened(conn)
            assert self._nursery is not None
            self._nursery.start_soon(conn.run)
            pending.conn = conn
        finally:
            del self._connecting[addr]
            pending.event.set()

    async def _resolve(self, target: str | Connection, deadline: float, timeout: float
                       ) -> Connection:
        if isinstance(target, Connection):
            if target.closed:
                raise RemotingSendRequestError(target.remote_addr, "connection is closed")
            return target
        return await self.get_connection(target, deadline, timeout)

    # ------------------------------------------------------------------ sending

    async def _acquire(self, sem: trio.Semaphore, deadline: float, addr: str | None,
                       timeout: float) -> None:
        try:
            sem.acquire_nowait()
            return
        except trio.WouldBlock:
            pass
        with trio.move_on_at(deadline):
            await sem.acquire()
            return
        raise RemotingTooManyRequestsError(
            f"no in-flight permit within {timeout}s ({sem.statistics().tasks_waiting} waiting); "
            "slow down or raise the *_semaphore_value setting", addr,
        )

    def _send(self, conn: Connection, request: RemotingCommand, fut: ResponseFuture,
              deadline: float, sem: trio.Semaphore) -> None:
        """Register ``fut`` and queue ``request`` (trio thread, sync; the permit is held)."""
        fut._permit_release = sem.release
        if request.opaque in self.table:
            request.opaque = next_opaque()  # the same command sent twice: keep opaques unique
        fut.opaque = request.opaque
        fut.conn = conn
        fut.deadline = deadline
        try:
            frame = encode_frame(request)
        except CodecError as exc:
            err = RemotingCommandError(f"request cannot be encoded: {exc}", fut.addr)
            err.__cause__ = exc
            fut._fail(err)
            return
        self.table.add(fut)
        self._arm_timer(deadline)
        code = request.code
        self._sent[code] = self._sent.get(code, 0) + 1
        if not conn.write_frame(frame) and self.table.pop_for(fut.opaque, conn) is fut:
            fut._fail_send("connection is closed")

    def _send_oneway(self, conn: Connection, request: RemotingCommand,
                     fut: ResponseFuture | None, sem: trio.Semaphore) -> None:
        request.flag |= 2
        try:
            frame = encode_frame(request)
        except CodecError as exc:
            sem.release()
            err = RemotingCommandError(f"request cannot be encoded: {exc}", conn.remote_addr)
            err.__cause__ = exc
            if fut is None:
                raise err from exc
            fut._fail(err)
            return
        if not conn.write_frame(frame, on_sent=sem.release):
            sem.release()
            err2 = RemotingSendRequestError(conn.remote_addr, "connection is closed")
            if fut is None:
                raise err2
            fut._fail(err2)
            return
        self._sent[request.code] = self._sent.get(request.code, 0) + 1
        if fut is not None:
            fut._complete(request)  # "queued": the blocking caller may return

    # ------------------------------------------------------------------ trio-native calls

    async def start_invoke(self, target: str | Connection, request: RemotingCommand,
                           timeout: float, callback: Callable[[ResponseFuture], object] | None
                           = None) -> ResponseFuture:
        """Send ``request``; return its future. Failures are recorded in the future."""
        deadline = trio.current_time() + timeout
        addr = target.remote_addr if isinstance(target, Connection) else target
        fut = ResponseFuture(request, addr, timeout, self.get_callback_executor)
        if callback is not None:
            fut.add_done_callback(callback)
        try:
            conn = await self._resolve(target, deadline, timeout)
            await self._acquire(self.async_permits, deadline, addr, timeout)
        except RemotingError as exc:
            fut._fail(exc)
            return fut
        self._send(conn, request, fut, deadline, self.async_permits)
        return fut

    async def invoke(self, target: str | Connection, request: RemotingCommand,
                     timeout: float) -> RemotingCommand:
        """Send ``request`` and wait for its response (see RemotingClient.invoke_sync)."""
        fut = await self.start_invoke(target, request, timeout)
        try:
            return await fut.wait()
        except BaseException:
            if not fut.done() and self.table.pop_for(fut.opaque, fut.conn) is fut:
                fut._fail(RemotingError("the call was cancelled", fut.addr))
            raise

    async def invoke_oneway(self, target: str | Connection, request: RemotingCommand,
                            timeout: float) -> None:
        """Queue a oneway request (see RemotingClient.invoke_oneway)."""
        deadline = trio.current_time() + timeout
        addr = target.remote_addr if isinstance(target, Connection) else target
        conn = await self._resolve(target, deadline, timeout)
        await self._acquire(self.oneway_permits, deadline, addr, timeout)
        self._send_oneway(conn, request, None, self.oneway_permits)

    async def invoke_many(self, target: str | Connection, requests: Sequence[RemotingCommand],
                          timeout: float, limit: int) -> list[RemotingCommand | RemotingError]:
        """Send all ``requests`` with at most ``limit`` in flight; results in order."""
        done = trio.Event()
        batch = _Batch(self, target, requests, timeout, limit, lambda _: done.set())
        batch.start()
        await done.wait()
        return batch.results

    # ------------------------------------------------------------------ calls from threads

    def submit_from_thread(
        self, target: str | Connection, request: RemotingCommand, timeout: float,
        kind: InvokeKind, callback: Callable[[ResponseFuture], object] | None = None,
    ) -> ResponseFuture:
        """Hand a call to the trio thread; return its future (any thread but the loop's).

        For ``kind="oneway"`` the future completes once the frame is queued.
        """
        addr = target.remote_addr if isinstance(target, Connection) else target
        fut = ResponseFuture(request, addr, timeout, self.get_callback_executor)
        if callback is not None:
            fut.add_done_callback(callback)
        try:
            self.inbox.post(self._start_from_thread, (target, request, timeout, kind, fut))
        except RuntimeError as exc:  # trio.RunFinishedError
            raise RemotingError(f"the {self.role} is shut down", addr) from exc
        return fut

    def _start_from_thread(self, args: tuple[Any, ...]) -> None:
        target, request, timeout, kind, fut = args
        if self.closed or self._nursery is None:
            fut._fail(RemotingError(f"the {self.role} is shut down", fut.addr))
            return
        deadline = trio.current_time() + timeout
        conn = target if isinstance(target, Connection) else self.channels.get(target)
        sem = self.oneway_permits if kind == "oneway" else self.async_permits
        if conn is not None and not conn.closed:
            try:
                sem.acquire_nowait()
            except trio.WouldBlock:
                pass
            else:
                if kind == "oneway":
                    self._send_oneway(conn, request, fut, sem)
                else:
                    self._send(conn, request, fut, deadline, sem)
                return
        self._nursery.start_soon(self._start_slow, target, request, timeout, deadline, kind, fut)

    async def _start_slow(self, target: str | Connection, request: RemotingCommand,
                          timeout: float, deadline: float, kind: InvokeKind,
                          fut: ResponseFuture) -> None:
        sem = self.oneway_permits if kind == "oneway" else self.async_permits
        try:
            conn = await self._resolve(target, deadline, timeout)
            await self._acquire(sem, deadline, fut.addr, timeout)
        except RemotingError as exc:
            fut._fail(exc)
            return
        if kind == "oneway":
            self._send_oneway(conn, request, fut, sem)
        else:
            self._send(conn, request, fut, deadline, sem)

    def submit_many_from_thread(
        self, target: str | Connection, requests: Sequence[RemotingCommand], timeout: float,
        limit: int, on_done: Callable[[list[RemotingCommand | RemotingError]], None],
    ) -> None:
        """Start a batch from a thread; ``on_done(results)`` runs on the trio thread."""
        try:
            self.inbox.post(
                lambda _: _Batch(self, target, requests, timeout, limit, on_done).start(), None
            )
        except RuntimeError as exc:
            raise RemotingError(f"the {self.role} is shut down") from exc

    # ------------------------------------------------------------------ statistics

    def statistics(self) -> EndpointStatistics:
        """Return a snapshot of the counters (trio thread, or tolerate slight tearing)."""
        queue: dict[int, int] = {
            code: entry.pool.in_pool
            for code, entry in list(self.processors.items()) if entry.pool is not None
        }
        return EndpointStatistics(
            connections=len(self.connections),
            in_flight=len(self.table),
            requests_sent=dict(self._sent),
            requests_received=dict(self._received),
            error_replies=dict(self._error_replies),
            timeouts=self._timeouts,
            orphaned_responses=self._orphans,
            processor_queue=queue,
        )


class _Batch:
    """A window of requests on one target: a sync state machine driven by completions."""

    def __init__(self, endpoint: Endpoint, target: str | Connection,
                 requests: Sequence[RemotingCommand], timeout: float, limit: int,
                 on_done: Callable[[list[RemotingCommand | RemotingError]], None]) -> None:
        self.endpoint = endpoint
        self.target = target
        self.requests = requests
        self.timeout = timeout
        self.limit = max(1, limit)
        self.on_done = on_done
        self.results: list[Any] = [None] * len(requests)
        self.addr = target.remote_addr if isinstance(target, Connection) else target
        self.conn: Connection | None = None
        self._next = 0
        self._in_flight = 0
        self._completed = 0
        self._pumping = False

    def start(self) -> None:
        ep = self.endpoint
        if not self.requests:
            self.on_done(self.results)
            return
        conn = self.target if isinstance(self.target, Connection) else ep.channels.get(
            self.target)
        if conn is not None and not conn.closed:
            self.conn = conn
            self._pump()
        elif ep._nursery is None or ep.closed:
            self._fail_rest(RemotingError(f"the {ep.role} is shut down", self.addr))
        else:
            ep._nursery.start_soon(self._connect_then_pump)

    async def _connect_then_pump(self) -> None:
        deadline = trio.current_time() + self.timeout
        try:
            self.conn = await self.endpoint._resolve(self.target, deadline, self.timeout)
        except RemotingError as exc:
            self._fail_rest(exc)
            return
        self._pump()

    def _fail_rest(self, exc: RemotingError) -> None:
        n = len(self.requests)
        for i in range(self._next, n):
            self.results[i] = exc
        self._completed += n - self._next
        self._next = n
        if self._completed == n:
            self._finish()

    def _pump(self) -> None:
        if self._pumping:
            return
        self._pumping = True
        ep = self.endpoint
        sem = ep.async_permits
        conn = self.conn
        assert conn is not None
        try:
            while self._in_flight < self.limit and self._next < len(self.requests):
                i = self._next
                self._next += 1
                request = self.requests[i]
                try:
                    sem.acquire_nowait()
                except trio.WouldBlock:
                    self._record(i, RemotingTooManyRequestsError(
                        "no in-flight permit for a batch request; lower the batch limit",
                        self.addr))
                    continue
                fut = ResponseFuture(request, self.addr, self.timeout)
                fut._add_completion_hook(partial(self._done_one, i))
                self._in_flight += 1
                ep._send(conn, request, fut, trio.current_time() + self.timeout, sem)
        finally:
            self._pumping = False
        if self._completed == len(self.requests):
            self._finish()

    def _record(self, i: int, result: object) -> None:
        self.results[i] = result
        self._completed += 1

    def _done_one(self, i: int, fut: ResponseFuture) -> None:
        self._in_flight -= 1
        self._record(i, fut.response_command if fut.cause is None else fut.cause)
        if self._completed == len(self.requests):
            self._finish()
        elif not self._pumping:
            self._pump()

    def _finish(self) -> None:
        if self.on_done is not None:
            on_done, self.on_done = self.on_done, None  # type: ignore[assignment]
            on_done(self.results)
