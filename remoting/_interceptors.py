"""Interceptors: code around every call (client side) and every processed request (server side).

An interceptor gets the call and a continuation, ``proceed``, as grpc's interceptors do; it
may change the call before it goes on, act on its outcome, go on more than once (a retry) or
not at all (a short cut). Interceptors run in registration order, the first registered
outermost, around the RPC hooks: a client's hooks run inside ``proceed``, just before the
request is sent, so a hook that signs the request (ACL) signs what interceptors added.

Each side has two methods, one per face, and the base classes pass calls through unchanged:
override the one your code uses, or both. OpenTelemetry support
(`remoting._observability._telemetry`) is built on this API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from codec import RemotingCommand
    from processors import AsyncRequestProcessor, RequestContext, RequestProcessor

    from ._core._calling._future import ResponseFuture

__all__ = ["CallKind", "ClientCall", "ClientInterceptor", "RequestKind", "ServerCall",
           "ServerInterceptor", "chain", "chain_async"]

# How one request goes out and is answered (the invoker's and the thread driver's sends).
RequestKind = Literal["sync", "async", "oneway"]
# The call a user made (one per face method); a "many" call sends each request as "async".
CallKind = Literal[RequestKind, "many"]


@dataclass(slots=True, kw_only=True)
class ClientCall:
    """One outgoing call, as client interceptors see it (they may change it).

    What ``proceed(call)`` returns depends on ``kind``: ``"sync"``, the response (it raises
    a `RemotingError` on failure); ``"async"``, the `ResponseFuture` at once; ``"oneway"``,
    None once the frame is queued; ``"many"``, the list of responses and errors.

    Attributes:
        kind: the method called: ``invoke_sync``, ``invoke_async``, ``invoke_oneway`` or
            ``invoke_many``.
        addr: ``"host:port"``; None for a client's address list; for a server calling a
            connected client back, that client's address.
        request: the request (for ``"many"``, the first of ``requests``).
        requests: every request of an ``invoke_many`` call; ``(request,)`` otherwise.
        timeout: seconds for the call (for ``"many"``, for each request).
        role: ``"client"``, or ``"server"`` for a server calling a connected client.
        retry_busy: ``invoke_sync``'s option: resend after SYSTEM_BUSY replies.
        callback: ``invoke_async``'s callback, run once the future completes.
        limit: ``invoke_many``'s requests in flight at most.
        finished_at: ``invoke_many`` only, filled by ``proceed``: for each request, the
            `time.monotonic` instant its outcome was known.
    """

    kind: CallKind
    addr: str | None
    request: RemotingCommand
    timeout: float
    requests: Sequence[RemotingCommand] = ()
    role: Literal["client", "server"] = "client"
    retry_busy: bool = False
    callback: Callable[[ResponseFuture], object] | None = None
    limit: int = 64
    finished_at: list[float] = field(default_factory=list)
    target: object = field(default=None, repr=False)  # what the core sends to (internal)

    def __post_init__(self) -> None:
        if not self.requests:
            self.requests = (self.request,)


@dataclass(slots=True, kw_only=True)
class ServerCall:
    """One request about to be processed, as server interceptors see it.

    ``proceed(call)`` runs the RPC hooks and the processor and returns its response (None:
    the processor replies later, or the request is oneway). An exception the processor
    raised comes out of ``proceed``; the reply to an exception that leaves the outermost
    interceptor is SYSTEM_ERROR naming it (`AbortProcessError`: its own code).

    Attributes:
        request: the request.
        context: the processor's `RequestContext` (the peer's address, its channel).
        role: ``"server"``, or ``"client"`` for a client serving a server's call back.
        processor: the processor that will run.
    """

    request: RemotingCommand
    context: RequestContext
    processor: RequestProcessor | AsyncRequestProcessor
    role: Literal["client", "server"] = "server"


class ClientInterceptor:
    """Base class of client interceptors: both methods pass the call on unchanged.

    `intercept_call` runs for the blocking faces (`RemotingClient`, `RemotingServer`, a
    channel's blocking methods) on the calling thread; `intercept_call_async` for the trio
    faces, in the calling task. Both run in the caller's context (`contextvars`).
    """

    def intercept_call(self, call: ClientCall, proceed: Callable[[ClientCall], Any]) -> Any:
        """Return ``proceed(call)``: the call's outcome (see `ClientCall`)."""
        return proceed(call)

    async def intercept_call_async(
        self, call: ClientCall, proceed: Callable[[ClientCall], Awaitable[Any]]
    ) -> Any:
        """Return ``await proceed(call)``: the call's outcome (see `ClientCall`)."""
        return await proceed(call)


class ServerInterceptor:
    """Base class of server interceptors: both methods run the processor unchanged.

    `intercept_request` wraps sync processors, on their pool's thread;
    `intercept_request_async` wraps async processors, on the event loop (it must not block).
    Both run in the request's own context (`contextvars`), where the processor runs too.
    Requests refused before processing (unknown code, busy, going away) reach neither.
    """

    def intercept_request(
        self, call: ServerCall, proceed: Callable[[ServerCall], RemotingCommand | None]
    ) -> RemotingCommand | None:
        """Return ``proceed(call)``: the processor's response."""
        return proceed(call)

    async def intercept_request_async(
        self, call: ServerCall,
        proceed: Callable[[ServerCall], Awaitable[RemotingCommand | None]],
    ) -> RemotingCommand | None:
        """Return ``await proceed(call)``: the processor's response."""
        return await proceed(call)



def chain(steps: Sequence[Callable[[Any, Callable[[Any], Any]], Any]],
          last: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Compose ``steps`` (``step(call, proceed)``, first outermost) around ``last(call)``."""
    proceed = last
    for step in reversed(steps):
        proceed = _link(step, proceed)
    return proceed


def _link(step: Callable[[Any, Callable[[Any], Any]], Any], proceed: Callable[[Any], Any]
          ) -> Callable[[Any], Any]:
    def run(call: Any) -> Any:
        return step(call, proceed)
    return run


def chain_async(steps: Sequence[Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]],
                last: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """`chain` for coroutine functions."""
    proceed = last
    for step in reversed(steps):
        proceed = _link_async(step, proceed)
    return proceed


def _link_async(step: Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]],
                proceed: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    def run(call: Any) -> Awaitable[Any]:
        return step(call, proceed)  # the step's own coroutine: no wrapper to await it
    return run
