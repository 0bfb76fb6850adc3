"""Running one request: interceptors and RPC hooks around the processor, and the encoded reply.

`serve_sync` / `serve_async` run the hooks and the processor (the innermost step of the
interceptors' chain). `run_sync_request` (on a pool thread) and `run_async_request` (on the
loop) never raise for a processor, hook or interceptor failure: that becomes a SYSTEM_ERROR
reply, logged once as ``processor.failed``. They return a `Reply`: the encoded frame and its
response code (for the error-reply counts), or None when nothing is to be sent.
"""

from __future__ import annotations

import traceback
import types
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import trio

from codec import FLAG_ONEWAY, CodecError, RemotingCommand, ResponseCode, encode_frame_parts

from ..._checks import request_code
from ..._hooks import AbortProcessError
from ..._log import log

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
    from contextvars import Context

    from codec import EncodedFrame

    from ..._hooks import RPCHook
    from ..._interceptors import ServerCall

__all__ = [
    "Reply",
    "Suspended",
    "encode_reply",
    "error_reply",
    "FAILURES",
    "exception_simple_desc",
    "failure",
    "in_async_processor",
    "mark_reader_task",
    "resume_suspended",
    "run_async_request",
    "run_sync_request",
    "serve_async",
    "serve_sync",
]

# The frame to send (None: already sent), and its response code.
Reply: TypeAlias = "tuple[EncodedFrame | None, int]"

# What a processor, hook or interceptor may raise that becomes a SYSTEM_ERROR reply. Not
# KeyboardInterrupt (Ctrl-C stops the server) nor trio.Cancelled (shutdown): they propagate.
# A processor's own GeneratorExit is turned into a RuntimeError where it is caught.
FAILURES: Final = (Exception, SystemExit)

# A connection's reader task, set once per reader; each request's context is a copy of its
# reader's, and the task that runs an async processor to its end is the reader that began it.
_READER_TASK: Final[ContextVar[object]] = ContextVar("remoting_reader_task", default=None)


def mark_reader_task() -> None:
    """Label the calling task as a connection's reader (it runs async processors)."""
    _READER_TASK.set(trio.lowlevel.current_task())


def in_async_processor() -> bool:
    """True in the task running an async processor (or the hooks around it) now."""
    return _READER_TASK.get() is trio.lowlevel.current_task()


def exception_simple_desc(exc: BaseException) -> str:
    """Describe ``exc`` like RocketMQ's UtilAll.exceptionSimpleDesc: type, message, where.

    Never raises, even for an exception whose ``__str__`` does.
    """
    try:
        message = str(exc)
    except Exception:
        message = "<its message could not be made>"
    desc = f"{type(exc).__module__}.{type(exc).__qualname__}: {message}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        desc += f", {last.name}({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
    return desc


def error_reply(request: RemotingCommand, code: int, remark: str) -> Reply | None:
    """Return the encoded error response to ``request``, or None for a oneway request."""
    if request.flag & FLAG_ONEWAY:
        return None
    return encode_reply(request, RemotingCommand.create_response(code, remark))


def encode_reply(request: RemotingCommand, response: object, limit: int = 0x7FFFFFFF + 4,
                 header_limit: int = 0xFFFFFF) -> Reply | None:
    """Stamp ``response`` as the answer to ``request`` and encode it (None for oneway).

    A response that is not a `RemotingCommand`, cannot be encoded, or would make a frame
    over ``limit`` bytes or a header over ``header_limit`` bytes (the peer's
    ``max_frame_bytes`` and ``max_header_bytes``), becomes a SYSTEM_ERROR reply saying so
    (logged once as ``processor.bad_response``).
    """
    if request.flag & FLAG_ONEWAY:  # is_oneway, inlined: this runs per request
        return None
    if not isinstance(response, RemotingCommand):
        problem = f"processor returned {type(response).__name__}, not a RemotingCommand"
    else:
        response.opaque = request.opaque
        response.flag |= 1
        response.serialize_type = request.serialize_type  # mirror the request, as 4.9
        try:
            return encode_frame_parts(response, limit, header_limit), response.code
        except CodecError as exc:
            problem = f"response could not be encoded: {exc}"
        except (TypeError, ValueError, AttributeError) as exc:  # e.g. a str body
            problem = f"response could not be encoded: {type(exc).__name__}: {exc}"
    log.error("processor.bad_response", opaque=request.opaque, code=request.code,
              error=problem)
    fallback = RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, problem)
    fallback.opaque = request.opaque
    fallback.serialize_type = request.serialize_type
    return encode_frame_parts(fallback), ResponseCode.SYSTEM_ERROR


def failure(request: RemotingCommand, exc: BaseException) -> RemotingCommand:
    """Return the response to a request whose processor or hook raised ``exc`` (logged once
    as ``processor.failed``; `AbortProcessError` answers with its own code and remark when
    they fit the wire). Never raises: the reply to a failure must not fail in turn."""
    if isinstance(exc, AbortProcessError) and _abort_fits(exc):
        return RemotingCommand.create_response(exc.code, exc.remark)
    try:
        log.error("processor.failed", opaque=request.opaque, code=request.code, exc_info=exc)
    except Exception:  # a logging handler that cannot format this exception
        pass
    return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, exception_simple_desc(exc))


def _abort_fits(exc: AbortProcessError) -> bool:
    """Whether an `AbortProcessError`'s code is an int32 and its remark a str or None."""
    try:
        request_code(exc.code)  # a response code follows the same wire rule
    except (TypeError, ValueError):
        return False
    return exc.remark is None or isinstance(exc.remark, str)


def _refused_by_hooks(
    hooks: Sequence[RPCHook], addr: str, request: RemotingCommand
) -> RemotingCommand | None:
    """Run the before-hooks; if one raises, run the after-hooks with the failure response and
    return it (the processor is skipped), else return None."""
    try:
        for hook in hooks:
            hook.do_before_request(addr, request)
    except Exception as exc:
        placeholder = failure(request, exc)
        try:
            _after(hooks, addr, request, placeholder)
        except Exception as after_exc:
            placeholder = failure(request, after_exc)
        return placeholder
    return None


def _after(
    hooks: Sequence[RPCHook], addr: str, request: RemotingCommand, response: RemotingCommand | None
) -> None:
    for hook in hooks:
        hook.do_after_response(addr, request, response)


def _after_hooks(hooks: Sequence[RPCHook], addr: str, request: RemotingCommand,
                 response: RemotingCommand | None) -> RemotingCommand | None:
    """Run the after-hooks on a processor's response; one that raises replaces it with
    SYSTEM_ERROR (SPEC 6.1)."""
    try:
        _after(hooks, addr, request, response)
    except Exception as exc:
        return failure(request, exc)
    return response


def serve_sync(hooks: Sequence[RPCHook], call: ServerCall) -> RemotingCommand | None:
    """Run the hooks and a sync processor; return its response. The processor's own
    exception propagates (interceptors see it; `run_sync_request` turns it into a reply)."""
    ctx, request = call.context, call.request
    if hooks and (refusal := _refused_by_hooks(hooks, ctx.remote_addr, request)) is not None:
        return refusal
    response = call.processor.process_request(ctx, request)
    if hooks:
        return _after_hooks(hooks, ctx.remote_addr, request, response)  # type: ignore[arg-type]
    return response  # type: ignore[return-value]


def serve_async(hooks: Sequence[RPCHook], call: ServerCall
                ) -> Awaitable[RemotingCommand | None]:
    """`serve_sync` for an async processor (on the loop): without hooks, the processor's
    own coroutine."""
    if not hooks:
        return call.processor.process_request(call.context, call.request)  # type: ignore[return-value]
    return _serve_async_hooked(hooks, call)


async def _serve_async_hooked(hooks: Sequence[RPCHook], call: ServerCall
                              ) -> RemotingCommand | None:
    ctx, request = call.context, call.request
    if hooks and (refusal := _refused_by_hooks(hooks, ctx.remote_addr, request)) is not None:
        return refusal
    response = await call.processor.process_request(ctx, request)  # type: ignore[misc]
    return _after_hooks(hooks, ctx.remote_addr, request, response)


def run_sync_request(serve: Callable[[ServerCall], RemotingCommand | None], call: ServerCall,
                     limit: int, header_limit: int) -> Reply | None:
    """Process ``call`` with ``serve`` (hooks, interceptors, the processor; on a pool
    thread); return the frame to send (at most ``limit`` bytes, its header at most
    ``header_limit``), or None. Never raises for a processor's failure."""
    request = call.request
    try:
        response = serve(call)
    except BaseException as exc:  # on a pool thread: only the processor raises these here
        return encode_reply(request, failure(request, exc), limit, header_limit)
    return None if response is None else encode_reply(request, response, limit, header_limit)


async def run_async_request(
    serve: Callable[[ServerCall], Awaitable[RemotingCommand | None]], call: ServerCall,
    limit: int, header_limit: int,
) -> Reply | None:
    """`run_sync_request` for an async processor, on the loop."""
    request = call.request
    try:
        response = await serve(call)
    except FAILURES as exc:
        return encode_reply(request, failure(request, exc), limit, header_limit)
    return None if response is None else encode_reply(request, response, limit, header_limit)


@types.coroutine
def resume_suspended(coro: Coroutine[Any, Any, Reply | None], trap: Any, context: Context
                     ) -> Generator[Any, Any, Reply | None]:
    """Await ``coro`` after its first step was run by hand and yielded ``trap``.

    The caller ran ``context.run(coro.send, None)`` itself to learn whether the coroutine
    suspends; this passes that first trap on to trio and relays every later step, each in
    ``context`` (``yield from`` cannot resume a coroutine that already started).
    """
    run = context.run
    message = trap
    while True:
        try:
            value = yield message
        except GeneratorExit:
            run(coro.close)  # in the request's context: its finally blocks may reset vars
            raise
        except BaseException as exc:  # thrown in by the runner: forward it
            try:
                message = run(coro.throw, exc)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            except GeneratorExit as own:  # the processor's, not a close of this generator
                raise RuntimeError("the processor raised GeneratorExit") from own
        else:
            try:
                message = run(coro.send, value)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            except GeneratorExit as own:
                raise RuntimeError("the processor raised GeneratorExit") from own


class Suspended:
    """An async processor that suspended in its first step: finished by the task that ran
    that step (see `resume_suspended`), then ``done(code, reply)``."""

    __slots__ = ("_context", "_coro", "_done", "_header_limit", "_limit", "_request", "_trap",
                 "_wrapped")

    def __init__(self, request: RemotingCommand, coro: Coroutine[Any, Any, Any], trap: object,
                 context: Context, *, wrapped: bool, limit: int, header_limit: int,
                 done: Callable[[int, Reply | None], None]) -> None:
        self._request = request
        self._coro = coro
        self._trap = trap
        self._context = context
        self._wrapped = wrapped  # run_async_request's coroutine: its value is the reply
        self._limit = limit  # the largest frame the peer accepts
        self._header_limit = header_limit  # and the largest header
        self._done = done

    async def finish(self) -> None:
        """Run the processor to the end and reply."""
        request = self._request
        reply: Reply | None = None
        try:
            result = await resume_suspended(self._coro, self._trap, self._context)
            reply = result if self._wrapped or result is None else encode_reply(
                request, result, self._limit, self._header_limit)
        except FAILURES as exc:  # a hook-less processor's own failure
            reply = encode_reply(request, failure(request, exc), self._limit,
                                 self._header_limit)
        finally:
            self._done(request.code, reply)
