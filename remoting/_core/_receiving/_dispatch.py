"""`Dispatcher`: the receiving side (as RocketMQ's ``NettyRemotingAbstract.processRequestCommand``).

Theory of operation (loop thread only, but for registration):
- Registering (`register`, `register_hook`, `register_interceptor`) may happen on any thread,
  a blocking face's caller, while the loop and other threads (a pool's, OpenTelemetry's
  metric reader in `queue_depths`) read what it changes. So what it changes is replaced,
  never mutated: a reader holds one consistent dict or list, and writers take
  ``_register_lock`` (no reader does) so that two registrations never lose one another.
- `route` is the decision, sans-I/O: the processor entry for a request, or the `Refusal` to
  answer instead, in RocketMQ's order: unknown code -> REQUEST_CODE_NOT_SUPPORTED (but
  `PING_REQUEST_CODE` with no processor of its own -> SUCCESS, the transport's own answer);
  shutting down -> GO_AWAY (to peers that understand it); ``reject_request()`` ->
  SYSTEM_BUSY ``[REJECTREQUEST]``; a full pool -> SYSTEM_BUSY ``[OVERLOAD]``. Before all of
  these, a client drops, unanswered, a request that needs an answer while its connection's
  queue is over the high water mark (the peer does not read): see `route`.
- `request_received` acts on it. An async processor runs its first step right there, in the
  reader (most finish without suspending); one that suspends is returned as a `Suspension`
  for the reader to finish. A sync processor's request is recorded in its code's pool; the
  pools get a read's requests together at `read_done`, and their results come back in
  batches (`_pool_results`), whose replies leave in one send per connection.
- What a part asks to run once the read ends (`after_read`, while a read of requests is
  being handled: an event bus's pushes, so that what one read routes to a consumer goes
  together) runs at `read_done`, after the pools got theirs.
- Each request runs in a fresh copy of the context (pool or loop): bindings never leak.
- ``processing`` counts requests handed to processors and not finished; graceful shutdown
  waits for it to reach zero.
"""

from __future__ import annotations

import threading
from contextvars import copy_context
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import trio

from codec import FLAG_ONEWAY, LanguageCode, RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestProcessor, StreamProcessor

from ..._checks import processor_registration, rpc_hook
from ..._interceptors import ServerCall, chain, chain_async
from ..._log import log
from ..._messaging._codes import STREAM_CODES
from .._doors._threads import mark_own_thread
from ._first_step import WHOLE, SelfCheck, Suspended, first_step
from ._pools import ExecutorPool, ProcessorPool
from ._processing import run_async_request, run_sync_request, serve_async, serve_sync
from ._replies import FAILURES, encode_reply, error_reply, failure

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine
    from concurrent.futures import Executor

    from codec import EncodedFrame
    from processors import RequestContext

    from ..._config import ClientConfig, ServerConfig
    from ..._hooks import RPCHook
    from ..._interceptors import ServerInterceptor
    from ..._observability._statistics import Counters
    from .._doors._threads import Inbox
    from ._replies import Reply

__all__ = ["PING_REQUEST_CODE", "Dispatcher", "ProcessorEntry", "Refusal", "Served"]

# The code `remoting ping` sends: every server of ours answers it SUCCESS unless a processor is
# registered for it, so a ping is no error reply in its statistics (an unknown code was).
# Ours, next to STATS_REQUEST_CODE, below int16's limit (the ROCKETMQ header) and far from
# RocketMQ's codes; a Java RocketMQ server answers it REQUEST_CODE_NOT_SUPPORTED.
PING_REQUEST_CODE: Final = 32_001
PONG_REMARK: Final = "pong"

REJECT_REMARK: Final = "[REJECTREQUEST]system busy, start flow control for a while"
OVERLOAD_REMARK: Final = "[OVERLOAD]system busy, start flow control for a while"
GO_AWAY_REMARK: Final = "please go away"
GO_AWAY_MIN_VERSION: Final = 475  # RocketMQ V5_3_1: later Java clients understand GO_AWAY



class Served(Protocol):
    """What the dispatcher uses of a connection (either driver's) it serves requests from."""

    id: int
    remote_addr: str
    ctx: RequestContext
    processing: int
    overloaded: int
    dropped: int
    high_water: int

    @property
    def queued_bytes(self) -> int: ...

    def send(self, frame: EncodedFrame) -> bool: ...

    def send_from_thread(self, frame: EncodedFrame) -> bool: ...

    def processing_done(self) -> None: ...

    def hold(self) -> bool: ...

    def flush_held(self) -> None: ...


SyncTask = tuple[Served, "RemotingCommand", RequestProcessor]
Pool = ProcessorPool[SyncTask] | ExecutorPool[SyncTask]


@dataclass(slots=True, kw_only=True)
class ProcessorEntry:
    """A registered processor and the pool its sync calls run on (None for async ones), or
    a built-in handler of the transport's own frames (run in the reader, no hooks)."""

    processor: RequestProcessor | AsyncRequestProcessor | None
    pool: Pool | None
    may_reject: bool = True  # False: reject_request is the base class's (always False)
    handler: Callable[[Served, RemotingCommand], None] | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    """The reply that replaces a request's processing: a refusal, or the transport's own
    answer to a ping (none is sent when ``"unanswerable"``)."""

    code: int
    remark: str
    reason: Literal["unknown code", "going away", "rejected", "overloaded", "ping",
                    "unanswerable"]


def _overrides_reject(processor: RequestProcessor | AsyncRequestProcessor) -> bool:
    """False if ``processor.reject_request`` is the base class's (never rejects)."""
    base = AsyncRequestProcessor if isinstance(processor, AsyncRequestProcessor) else (
        RequestProcessor)
    return (type(processor).reject_request is not base.reject_request
            or "reject_request" in getattr(processor, "__dict__", ()))


class Dispatcher:
    """Routes received requests to processors and sends their replies."""

    def __init__(self, role: Literal["client", "server"], config: ClientConfig | ServerConfig,
                 counters: Counters, inbox: Inbox, owner: object,
                 stream_opener: Callable[[StreamProcessor], AsyncRequestProcessor]) -> None:
        self._role = role
        self._stream_opener = stream_opener
        self._name = f"remoting-{role}"
        self._config = config
        self._max_frame = config.max_frame_bytes  # the peer's limits too, as RocketMQ assumes
        self._max_header = config.max_header_bytes
        # a client's reader never pauses (module docstring of _connection): it sheds instead
        self._sheds = role == "client"
        self._counters = counters
        self._inbox = inbox
        self._owner = owner  # whose threads the pools' threads are (see _threads)
        self._register_lock = threading.Lock()  # writers of the tables below (docstring)
        self.processors: dict[int, ProcessorEntry] = {}
        self.default: ProcessorEntry | None = None
        self.hooks: list[RPCHook] = []
        self.interceptors: list[ServerInterceptor] = []
        # hooks and interceptors around a processor, composed; None when there are none
        self._serve_sync: Callable[[ServerCall], RemotingCommand | None] | None = None
        self._serve_async: Callable[[ServerCall], Awaitable[RemotingCommand | None]] | None = None
        self.shutting_down = False
        self.processing = 0
        self._pools: list[Pool] = []
        self._pools_to_flush: list[ProcessorPool[SyncTask]] = []
        # a read of requests is being handled on the loop (set by its first request, cleared
        # by `read_done`): what `after_read` takes meanwhile runs at its end
        self._reading = False
        self._after_read: list[Callable[[], object]] = []
        self._idle: trio.Event | None = None
        self._idle_at = 0  # `_idle` is set once ``processing`` is down to this

    # ------------------------------------------------------------------ registration

    def register(self, code: int | None,
                 processor: RequestProcessor | AsyncRequestProcessor | StreamProcessor,
                 executor: Executor | None = None, threads: int | None = None) -> None:
        """Serve ``code`` (None: every code without a processor of its own) with ``processor``.

        Raises:
            ValueError: an executor was given for an async or stream processor; a code
                outside int32, or one of the stream frames' (`StreamCode`); ``threads``
                below 0.
            TypeError: ``processor`` is not a processor, or a `RequestProcessor` whose
                ``process_request`` is a coroutine function; a wrong type of ``code``,
                ``executor`` or ``threads``.
        """
        processor_registration(code, processor, executor, threads)
        if code in STREAM_CODES:
            raise ValueError(f"code {code} is reserved for the transport's stream frames "
                             "(32100-32103)")
        pool: Pool | None = None
        if isinstance(processor, StreamProcessor):
            if executor is not None:
                raise ValueError("a StreamProcessor runs on the event loop: no executor")
            processor = self._stream_opener(processor)
        if isinstance(processor, AsyncRequestProcessor):
            if executor is not None:
                raise ValueError("an AsyncRequestProcessor runs on the event loop: no executor")
        elif isinstance(processor, RequestProcessor):
            name = f"{self._name}-{'default' if code is None else code}"
            if executor is not None:
                pool = ExecutorPool(name, executor, run=self._run_sync, done=self._pool_results,
                                    inbox=self._inbox)
            else:
                pool = ProcessorPool(
                    name, threads or self._config.processor_threads(),
                    self._config.processor_queue_capacity, run=self._run_sync,
                    done=self._pool_results, inbox=self._inbox,
                    on_pending=self._pools_to_flush.append,
                    on_thread_start=lambda: mark_own_thread(self._owner),
                )
        else:
            raise TypeError("processor must subclass processors.RequestProcessor, "
                            "AsyncRequestProcessor or StreamProcessor")
        entry = ProcessorEntry(processor=processor, pool=pool,
                               may_reject=_overrides_reject(processor))
        with self._register_lock:  # replaced, never mutated: readers iterate on other threads
            if pool is not None:
                self._pools = [*self._pools, pool]
            if code is None:
                replaced, self.default = self.default, entry
            else:
                replaced = self.processors.get(code)
                self.processors = {**self.processors, code: entry}
        if replaced is not None and isinstance(replaced.pool, ProcessorPool):
            self._retire(replaced.pool)

    def register_handler(self, code: int,
                         handler: Callable[[Served, RemotingCommand], None]) -> None:
        """Handle ``code`` with the transport's own ``handler``: run in the reader, with no
        pool, hook or interceptor; a two-way request is answered SUCCESS after it."""
        self.processors[code] = ProcessorEntry(processor=None, pool=None, may_reject=False,
                                               handler=handler)

    def _retire(self, pool: ProcessorPool[SyncTask]) -> None:
        """Let a replaced processor's pool finish what it holds, then end its threads.

        On the loop thread (through the inbox) when the loop runs, as only the loop touches a
        pool's bookkeeping; what the loop gave the pool before the swap still runs and answers.
        """
        try:
            self._inbox.post(lambda _: pool.stop(), None)
        except RuntimeError:  # the loop is not running: nothing else touches the pool
            pool.stop()

    def register_hook(self, hook: RPCHook) -> None:
        """Run ``hook`` around every processor (once, in registration order); a `TypeError`
        if it lacks a method of `RPCHook`."""
        rpc_hook(hook)
        with self._register_lock:
            if hook not in self.hooks:
                # in place: the client's Caller shares this list (the server's requests
                # run a snapshot of it, see _compose)
                self.hooks.append(hook)
                self._compose()

    def register_interceptor(self, interceptor: ServerInterceptor, *,
                             outermost: bool = False) -> None:
        """Run ``interceptor`` around every processor, inside those registered before
        (``outermost``: outside every other, telemetry)."""
        with self._register_lock:
            if interceptor not in self.interceptors:
                self.interceptors = ([interceptor, *self.interceptors] if outermost
                                     else [*self.interceptors, interceptor])
                self._compose()

    def _compose(self) -> None:
        hooks = tuple(self.hooks)  # a request runs the before- and after-hooks of one set
        self._serve_sync = chain([i.intercept_request for i in self.interceptors],
                                 partial(serve_sync, hooks))
        self._serve_async = chain_async([i.intercept_request_async for i in self.interceptors],
                                        partial(serve_async, hooks))

    def _server_call(self, conn: Served, request: RemotingCommand,
                     processor: RequestProcessor | AsyncRequestProcessor) -> ServerCall:
        return ServerCall(request=request, context=conn.ctx, processor=processor,
                          role=self._role)

    # ------------------------------------------------------------------ the decision

    def route(self, request: RemotingCommand, backlogged: bool = False
              ) -> ProcessorEntry | Refusal:
        """Return the entry that processes ``request``, or the `Refusal` to answer instead.

        ``backlogged``: the request came on a connection whose reader does not pause (a
        client's) while its queue of frames to send is over the high water mark: its peer
        is not reading. Then a request that needs an answer is refused with no answer at all
        (``"unanswerable"``): every answer, even an error reply, would grow that queue
        without bound. A server stops reading instead; a client cannot, since it must go on
        reading the responses that drain the server (both pausing would deadlock).
        """
        if backlogged and not request.flag & FLAG_ONEWAY:  # oneway requests need no answer
            return _UNANSWERABLE
        entry = self.processors.get(request.code)
        if entry is None:
            if request.code == PING_REQUEST_CODE:
                return _PONG
            entry = self.default
        if entry is None:
            # RocketMQ's remark for an unknown code, without its leading space
            return Refusal(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                           f"request type {request.code} not supported", "unknown code")
        if self.shutting_down and (request.version > GO_AWAY_MIN_VERSION
                                   or request.language is LanguageCode.PYTHON):
            return _GOING_AWAY
        if entry.may_reject:
            try:
                rejected = entry.processor.reject_request()  # type: ignore[union-attr]
            except Exception:
                log.error("processor.failed", code=request.code, during="reject_request",
                          exc_info=True)
                rejected = False
            if rejected:
                return _REJECTED
        pool = entry.pool
        if pool is not None and not pool.has_room():
            return _OVERLOADED
        return entry

    # ------------------------------------------------------------------ acting on it

    def request_received(self, conn: Served, request: RemotingCommand
                         ) -> Suspended | None:
        """Process ``request`` (see the module docstring); return a suspended async processor
        that the calling task must finish."""
        self._reading = True
        received = self._counters.received
        code = request.code
        received[code] = received.get(code, 0) + 1
        entry = self.route(request, self._sheds and conn.queued_bytes > conn.high_water)
        if type(entry) is Refusal:
            self._refuse(conn, request, entry)
            return None
        assert isinstance(entry, ProcessorEntry)
        pool = entry.pool
        if pool is None:
            handler = entry.handler
            if handler is not None:
                handler(conn, request)
                if not request.flag & FLAG_ONEWAY:  # say it was taken
                    self._send_reply(conn, code, encode_reply(
                        request, RemotingCommand.create_response(ResponseCode.SUCCESS)))
                return None
            return self._run_async(conn, request, entry.processor)  # type: ignore[arg-type]
        if not pool.submit((conn, request, entry.processor)):  # type: ignore[arg-type]
            self._refuse(conn, request, _OVERLOADED)
            return None
        self.processing += 1
        conn.processing += 1
        return None

    def read_done(self, conn: Served) -> None:
        """Hand the requests recorded in one read to their pools, together; then run what
        was asked to run after the read (`after_read`)."""
        self._reading = False
        pools = self._pools_to_flush
        if pools:
            for pool in pools:
                pool.flush()
            pools.clear()
        after = self._after_read
        if after:
            self._after_read = []
            for fn in after:
                try:
                    fn()
                except Exception:  # a bug of the part's: the read's other work must go on
                    log.error("inbox.failed", fn=getattr(fn, "__qualname__", repr(fn)),
                              exc_info=True)

    def after_read(self, fn: Callable[[], object]) -> bool:
        """Run ``fn()`` once the read of requests being handled ends, after the rest of
        its requests (loop thread only); False, without taking it, if no such read is being
        handled (in a task of its own, say, or after the read, in a processor's later
        steps)."""
        if not self._reading:
            return False
        self._after_read.append(fn)
        return True

    def _refuse(self, conn: Served, request: RemotingCommand, refusal: Refusal) -> None:
        if refusal is _UNANSWERABLE:
            self._counters.requests_dropped += 1
            conn.dropped += 1
            if conn.dropped & (conn.dropped - 1) == 0:  # 1, 2, 4, 8...: never a flood
                log.warning("request.dropped", code=request.code, peer=conn.remote_addr,
                            queued_bytes=conn.queued_bytes, dropped_on_connection=conn.dropped,
                            reason="the peer does not read the answers already queued")
            return
        if refusal is _OVERLOADED:
            conn.overloaded += 1
            if conn.overloaded & (conn.overloaded - 1) == 0:  # 1, 2, 4, 8...: never a flood
                log.warning("processor.overloaded", code=request.code, peer=conn.remote_addr,
                            refused_on_connection=conn.overloaded)
        elif refusal is _REJECTED:
            log.debug("processor.rejected", code=request.code, opaque=request.opaque)
        self._send_reply(conn, request.code, error_reply(request, refusal.code, refusal.remark))

    def _send_reply(self, conn: Served, code: int, reply: Reply | None) -> None:
        if reply is None:
            return
        frame, response_code = reply
        if response_code:
            self._counters.count_error_reply(code)
        if frame is None:  # a pool thread sent it already
            self._counters.count_thread_send()
        elif not conn.send(frame):
            log.debug("response.dropped", conn_id=conn.id, peer=conn.remote_addr,
                      reason="connection closed")

    def write_response(self, conn: Served, request: RemotingCommand,
                       response: RemotingCommand) -> None:
        """Send a response produced later (long polling, `RequestContext.write_response`)."""
        self._send_reply(conn, request.code,
                         encode_reply(request, response, self._max_frame, self._max_header))

    def _run_async(self, conn: Served, request: RemotingCommand,
                   processor: AsyncRequestProcessor) -> Suspended | None:
        self.processing += 1
        conn.processing += 1
        context = copy_context()
        # Without hooks or interceptors the processor's own coroutine is run (no wrapper
        # coroutine per request); its result or failure becomes the reply here.
        serve = self._serve_async
        coro: Coroutine[Any, Any, Any] = (
            processor.process_request(conn.ctx, request) if serve is None
            else run_async_request(serve, self._server_call(conn, request, processor),
                                   self._max_frame, self._max_header))
        wrapped = serve is not None  # run_async_request's coroutine: its value is the reply
        if SelfCheck.usable is not True:  # this trio changed what it relies on (or unchecked)
            return Suspended(request, coro, WHOLE, context, wrapped=wrapped,
                             limit=self._max_frame, header_limit=self._max_header,
                             done=partial(self._processed, conn))
        try:
            done, value = first_step(context, coro)
        except (*FAILURES, GeneratorExit) as exc:  # only a bare processor's own failure
            self._processed(conn, request.code, encode_reply(
                request, failure(request, exc), self._max_frame, self._max_header))
            return None
        except BaseException:
            self._processed(conn, request.code, None)
            raise
        if done:
            self._processed(conn, request.code, value if wrapped or value is None else
                            encode_reply(request, value, self._max_frame, self._max_header))
            return None
        return Suspended(request, coro, value, context, wrapped=wrapped, limit=self._max_frame,
                         header_limit=self._max_header, done=partial(self._processed, conn))

    def _run_sync(self, task: SyncTask, alone: bool) -> Reply | None:
        """Run one sync processor (on a pool thread; touches no loop state).

        A reply computed alone goes straight to an idle socket from here (`_threads`); the
        loop then only does the bookkeeping (the frame comes back as None).
        """
        conn, request, processor = task
        serve = self._serve_sync
        if serve is None:  # no hooks, no interceptors
            try:
                response = processor.process_request(conn.ctx, request)
            except BaseException as exc:  # on a pool thread: only the processor raises these
                reply = encode_reply(request, failure(request, exc), self._max_frame,
                                     self._max_header)
            else:
                reply = None if response is None else encode_reply(
                    request, response, self._max_frame, self._max_header)
        else:
            reply = run_sync_request(serve, self._server_call(conn, request, processor),
                                     self._max_frame, self._max_header)
        if alone and reply is not None:
            frame, code = reply
            if frame is not None and conn.send_from_thread(frame):
                return None, code
        return reply

    def _pool_results(self, results: list[tuple[SyncTask, Reply | None]]) -> None:
        """Finish a batch of pool results; each connection's replies leave in one send."""
        touched: list[Served] = []
        for (conn, request, _), reply in results:
            if conn.hold():
                touched.append(conn)
            self._processed(conn, request.code, reply)
        for conn in touched:
            conn.flush_held()

    def _processed(self, conn: Served, code: int, reply: Reply | None) -> None:
        self.processing -= 1
        conn.processing_done()
        if reply is not None:
            self._send_reply(conn, code, reply)
        if self._idle is not None and self.processing <= self._idle_at:
            self._idle.set()

    # ------------------------------------------------------------------ lifecycle

    def queue_depths(self) -> dict[int, int]:
        """Return the tasks queued or running, by request code (sync processors)."""
        return {code: entry.pool.in_pool for code, entry in self.processors.items()
                if entry.pool is not None}

    async def wait_idle(self, own: int = 0) -> None:
        """Wait until no request is being processed but the caller's ``own``."""
        self._idle_at = own
        while self.processing > own:
            self._idle = trio.Event()
            await self._idle.wait()

    def stop_pools(self) -> None:
        """Let the pools' threads end once their queued tasks are done."""
        for pool in self._pools:
            pool.stop()

    def join_pools(self, deadline: float) -> list[str]:
        """Join the pools' threads until ``deadline``; return the names of those still running."""
        return [name for pool in self._pools for name in pool.join(deadline)]


_PONG: Final = Refusal(ResponseCode.SUCCESS, PONG_REMARK, "ping")
_GOING_AWAY: Final = Refusal(ResponseCode.GO_AWAY, GO_AWAY_REMARK, "going away")
_REJECTED: Final = Refusal(ResponseCode.SYSTEM_BUSY, REJECT_REMARK, "rejected")
_OVERLOADED: Final = Refusal(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK, "overloaded")
_UNANSWERABLE: Final = Refusal(ResponseCode.SYSTEM_BUSY, "", "unanswerable")  # no reply sent
