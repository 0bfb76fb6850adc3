"""Running one request: interceptors and RPC hooks around the processor.

`serve_sync` / `serve_async` run the hooks and the processor (the innermost step of the
interceptors' chain). `run_sync_request` (on a pool thread) and `run_async_request` (on the
loop) never raise for a processor, hook or interceptor failure: that becomes a SYSTEM_ERROR
reply, logged once as ``processor.failed``. They return a `Reply` (`_replies`): the encoded
frame and its response code (for the error-reply counts), or None when nothing is to be sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._replies import FAILURES, encode_reply, failure

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from codec import RemotingCommand

    from ..._hooks import RPCHook
    from ..._interceptors import ServerCall
    from ._replies import Reply

__all__ = ["run_async_request", "run_sync_request", "serve_async", "serve_sync"]


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
