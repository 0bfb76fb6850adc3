"""`Caller`: every way to make a call, for every face, with RPC hooks and interceptors.

The faces (blocking and trio clients and servers, channel handles) only check their own state
and call here. Without interceptors a call goes straight to the `Invoker` (or, from a thread,
`ThreadCalls`); with them, it goes through the chain built for its kind and face, composed once
when an interceptor is registered. A client's RPC hooks run innermost, just before the send
(for ``invoke_many``: the before-hooks on every request of the batch before any is handed on,
the after-hooks on each response once the batch is done); a server calling its clients back
runs none (as RocketMQ's ``NettyRemotingServer``).

The blocking methods run on the caller's thread (never the loop's); the ``a``-prefixed
methods on the loop, in the calling task. Each checks its arguments first (`_checks`): a wrong
request or timeout fails here, before any interceptor, permit or I/O.
"""

from __future__ import annotations

import _thread
import threading
import time
from typing import TYPE_CHECKING, Any, Final

from codec import FLAG_RESPONSE, ResponseCode

from .._checks import (
    ANSWERED,
    batch_limit,
    call_timeout,
    callback_of,
    requests_of,
    the_request,
)
from .._errors import RemotingError
from .._hooks import (
    run_after_hooks,
    run_after_hooks_many,
    run_before_hooks,
    run_before_hooks_many,
    with_after_hooks,
)
from .._interceptors import ClientCall, chain, chain_async
from ._deadlines import busy_backoff

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from codec import RemotingCommand

    from .._hooks import RPCHook
    from .._interceptors import CallKind, ClientInterceptor
    from ._channels import Target
    from ._future import ResponseFuture
    from ._invoker import Invoker
    from ._thread_calls import ThreadCalls

__all__ = ["Caller"]

BATCH_WAIT_SLACK: Final = 30.0  # seconds past a batch's deadlines before asking if the loop lives

Results = list["RemotingCommand | RemotingError"]


class Caller:
    """The call paths of one endpoint (see the module docstring)."""

    def __init__(self, invoker: Invoker, hooks: list[RPCHook], *, run_hooks: bool,
                 role: str) -> None:
        self._invoker = invoker
        self._threads: ThreadCalls = invoker.threads
        self._hooks = hooks if run_hooks else []
        self._role: Any = role
        self.interceptors: list[ClientInterceptor] = []  # outermost first
        self._outer: list[ClientInterceptor] = []
        self._innermost: list[ClientInterceptor] = []
        self._chains: dict[CallKind, Callable[[ClientCall], Any]] = {}
        self._async_chains: dict[CallKind, Callable[[ClientCall], Awaitable[Any]]] = {}

    def add(self, interceptor: ClientInterceptor, *, innermost: bool = False) -> None:
        """Add ``interceptor`` inside those registered before (once); rebuild the chains.
        ``innermost``: inside every other, even those added later (telemetry)."""
        if interceptor in self.interceptors:
            return
        if innermost:
            self._innermost.append(interceptor)
        else:
            self._outer.append(interceptor)
        self.interceptors = self._outer + self._innermost
        steps = [i.intercept_call for i in self.interceptors]
        self._chains = {"sync": chain(steps, self._sync), "async": chain(steps, self._future),
                        "oneway": chain(steps, self._oneway), "many": chain(steps, self._many)}
        async_steps = [i.intercept_call_async for i in self.interceptors]
        self._async_chains = {
            "sync": chain_async(async_steps, self._async_sync),
            "async": chain_async(async_steps, self._async_future),
            "oneway": chain_async(async_steps, self._async_oneway),
            "many": chain_async(async_steps, self._async_many)}

    def _call(self, kind: CallKind, target: Target, addr: str | None,
              request: RemotingCommand, timeout: float, **options: Any) -> ClientCall:
        return ClientCall(kind=kind, addr=addr, request=request, timeout=timeout,
                          role=self._role, target=target, **options)

    # ------------------------------------------------------------------ blocking (threads)

    def invoke_sync(self, target: Target, addr: str | None, request: RemotingCommand,
                    timeout: float, retry_busy: bool = False) -> RemotingCommand:
        """Send and wait, on the calling thread (see `RemotingClient.invoke_sync`)."""
        the_request(request)
        timeout = call_timeout(timeout)
        if self.interceptors:
            return self._chains["sync"](  # type: ignore[no-any-return]
                self._call("sync", target, addr, request, timeout, retry_busy=retry_busy))
        return self._sync_call(target, addr, request, timeout, retry_busy)

    def invoke_async(self, target: Target, addr: str | None, request: RemotingCommand,
                     timeout: float, callback: Callable[[ResponseFuture], object] | None
                     ) -> ResponseFuture:
        """Send; return the future at once (see `RemotingClient.invoke_async`)."""
        the_request(request)
        timeout = call_timeout(timeout)
        callback_of(callback)
        if self.interceptors:
            return self._chains["async"](  # type: ignore[no-any-return]
                self._call("async", target, addr, request, timeout, callback=callback))
        hooks = self._hooks
        if hooks:
            run_before_hooks(hooks, addr, request)
            callback = with_after_hooks(hooks, request, callback)
        return self._threads.submit(target, request, timeout, "async", callback)

    def invoke_oneway(self, target: Target, addr: str | None, request: RemotingCommand,
                      timeout: float) -> None:
        """Queue a oneway request and return (see `RemotingClient.invoke_oneway`)."""
        the_request(request, FLAG_RESPONSE)
        timeout = call_timeout(timeout)
        if self.interceptors:
            self._chains["oneway"](self._call("oneway", target, addr, request, timeout))
            return
        if self._hooks:
            run_before_hooks(self._hooks, addr, request)
        self._threads.submit(target, request, timeout, "oneway").result()

    def invoke_many(self, target: Target, addr: str | None,
                    requests: Sequence[RemotingCommand], timeout: float, limit: int
                    ) -> Results:
        """Send a batch and wait for all of it (see `RemotingClient.invoke_many`)."""
        requests = requests_of(requests)
        timeout = call_timeout(timeout)
        limit = batch_limit(limit)
        if self.interceptors and requests:
            return self._chains["many"](  # type: ignore[no-any-return]
                self._call("many", target, addr, requests[0], timeout, requests=requests,
                           limit=limit))
        return self._many_wait(target, addr, requests, timeout, limit, None)

    def _sync_call(self, target: Target, addr: str | None, request: RemotingCommand,
                   timeout: float, retry_busy: bool) -> RemotingCommand:
        hooks = self._hooks
        if hooks:
            run_before_hooks(hooks, addr, request)
        threads = self._threads
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            remaining = timeout if not attempt else deadline - time.monotonic()
            fut = (threads.send_directly(target, request, remaining)
                   or threads.submit(target, request, remaining, "sync"))
            response = fut.result()
            if not retry_busy or response.code != ResponseCode.SYSTEM_BUSY:
                break
            attempt += 1
            pause = busy_backoff(attempt)
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
        if hooks:
            run_after_hooks(hooks, fut.addr, request, response)
        return response

    def _many_wait(self, target: Target, addr: str | None, requests: Sequence[RemotingCommand],
                   timeout: float, limit: int, finished_at: list[float] | None) -> Results:
        hooks = self._hooks
        if hooks:
            run_before_hooks_many(hooks, addr, requests)
        lock = _thread.allocate_lock()
        lock.acquire()
        box: list[Results] = []

        def on_done(results: Results) -> None:
            box.append(results)
            lock.release()

        self._threads.submit_many(target, requests, timeout, limit, on_done, finished_at)
        waves = -(-len(requests) // max(1, limit))
        wait = min(timeout * max(1, waves) + BATCH_WAIT_SLACK, threading.TIMEOUT_MAX)
        while not lock.acquire(timeout=wait):  # a slow pace (few permits) is no failure
            if not self._threads.loop_answers():  # a stalled or ended loop is
                raise RemotingError("invoke_many: the event loop did not finish the batch", addr)
        if hooks:
            run_after_hooks_many(hooks, addr, requests, box[0])
        return box[0]

    # the ends of the blocking chains: what interceptors hand on is checked again here
    def _sync(self, call: ClientCall) -> RemotingCommand:
        request, timeout = checked(call)
        return self._sync_call(call.target, call.addr, request,  # type: ignore[arg-type]
                               timeout, call.retry_busy)

    def _future(self, call: ClientCall) -> ResponseFuture:
        request, timeout = checked(call)
        callback = callback_of(call.callback)
        if self._hooks:
            run_before_hooks(self._hooks, call.addr, request)
            callback = with_after_hooks(self._hooks, request, callback)
        return self._threads.submit(call.target, request,  # type: ignore[arg-type]
                                    timeout, "async", callback)

    def _oneway(self, call: ClientCall) -> None:
        request, timeout = checked(call, FLAG_RESPONSE)
        if self._hooks:
            run_before_hooks(self._hooks, call.addr, request)
        self._threads.submit(call.target, request,  # type: ignore[arg-type]
                             timeout, "oneway").result()

    def _many(self, call: ClientCall) -> Results:
        requests, timeout = checked_many(call)
        return self._many_wait(call.target, call.addr, requests,  # type: ignore[arg-type]
                               timeout, batch_limit(call.limit), call.finished_at)

    # ------------------------------------------------------------------ trio (the loop)

    async def ainvoke_sync(self, target: Target, addr: str | None, request: RemotingCommand,
                           timeout: float, retry_busy: bool = False) -> RemotingCommand:
        """Send and wait, in the calling task (see `TrioRemotingClient.invoke_sync`)."""
        the_request(request)
        timeout = call_timeout(timeout)
        if self.interceptors:
            return await self._async_chains["sync"](  # type: ignore[no-any-return]
                self._call("sync", target, addr, request, timeout, retry_busy=retry_busy))
        hooks = self._hooks
        if hooks:
            run_before_hooks(hooks, addr, request)
        response = await self._invoker.invoke(target, request, timeout, retry_busy)
        if hooks:
            run_after_hooks(hooks, addr, request, response)
        return response

    async def ainvoke_async(self, target: Target, addr: str | None, request: RemotingCommand,
                            timeout: float,
                            callback: Callable[[ResponseFuture], object] | None
                            ) -> ResponseFuture:
        """Send; return the future (see `TrioRemotingClient.invoke_async`)."""
        the_request(request)
        timeout = call_timeout(timeout)
        callback_of(callback)
        if self.interceptors:
            return await self._async_chains["async"](  # type: ignore[no-any-return]
                self._call("async", target, addr, request, timeout, callback=callback))
        hooks = self._hooks
        if hooks:
            run_before_hooks(hooks, addr, request)
            callback = with_after_hooks(hooks, request, callback)
        return await self._invoker.start_call(target, request, timeout, callback)

    async def ainvoke_oneway(self, target: Target, addr: str | None, request: RemotingCommand,
                             timeout: float) -> None:
        """Queue a oneway request (see `TrioRemotingClient.invoke_oneway`)."""
        the_request(request, FLAG_RESPONSE)
        timeout = call_timeout(timeout)
        if self.interceptors:
            await self._async_chains["oneway"](
                self._call("oneway", target, addr, request, timeout))
            return
        if self._hooks:
            run_before_hooks(self._hooks, addr, request)
        await self._invoker.invoke_oneway(target, request, timeout)

    async def ainvoke_many(self, target: Target, addr: str | None,
                           requests: Sequence[RemotingCommand], timeout: float, limit: int
                           ) -> Results:
        """Send a batch and wait for all of it (see `TrioRemotingClient.invoke_many`)."""
        requests = requests_of(requests)
        timeout = call_timeout(timeout)
        limit = batch_limit(limit)
        if self.interceptors and requests:
            return await self._async_chains["many"](  # type: ignore[no-any-return]
                self._call("many", target, addr, requests[0], timeout, requests=requests,
                           limit=limit))
        return await self._amany(target, addr, requests, timeout, limit, None)

    async def _amany(self, target: Target, addr: str | None,
                     requests: Sequence[RemotingCommand], timeout: float, limit: int,
                     finished_at: list[float] | None) -> Results:
        hooks = self._hooks
        if hooks:
            run_before_hooks_many(hooks, addr, requests)
        results = await self._invoker.invoke_many(target, requests, timeout, limit, finished_at)
        if hooks:
            run_after_hooks_many(hooks, addr, requests, results)
        return results

    # the ends of the trio chains: what interceptors hand on is checked again here
    async def _async_sync(self, call: ClientCall) -> RemotingCommand:
        request, timeout = checked(call)
        hooks = self._hooks
        if hooks:
            run_before_hooks(hooks, call.addr, request)
        response = await self._invoker.invoke(call.target,  # type: ignore[arg-type]
                                              request, timeout, call.retry_busy)
        if hooks:
            run_after_hooks(hooks, call.addr, request, response)
        return response

    async def _async_future(self, call: ClientCall) -> ResponseFuture:
        request, timeout = checked(call)
        callback = callback_of(call.callback)
        if self._hooks:
            run_before_hooks(self._hooks, call.addr, request)
            callback = with_after_hooks(self._hooks, request, callback)
        return await self._invoker.start_call(call.target,  # type: ignore[arg-type]
                                              request, timeout, callback)

    async def _async_oneway(self, call: ClientCall) -> None:
        request, timeout = checked(call, FLAG_RESPONSE)
        if self._hooks:
            run_before_hooks(self._hooks, call.addr, request)
        await self._invoker.invoke_oneway(call.target,  # type: ignore[arg-type]
                                          request, timeout)

    async def _async_many(self, call: ClientCall) -> Results:
        requests, timeout = checked_many(call)
        return await self._amany(call.target, call.addr,  # type: ignore[arg-type]
                                 requests, timeout, batch_limit(call.limit), call.finished_at)


def checked(call: ClientCall, refused: int = ANSWERED) -> tuple[RemotingCommand, float]:
    """Return the request and timeout of ``call`` as interceptors left them, checked as the
    call's arguments were (an interceptor may have changed them).

    Raises:
        TypeError, ValueError: as for the call's arguments.
    """
    return the_request(call.request, refused), call_timeout(call.timeout)


def checked_many(call: ClientCall) -> tuple[Sequence[RemotingCommand], float]:
    """`checked` for an ``invoke_many`` call: its requests and timeout."""
    return requests_of(call.requests), call_timeout(call.timeout)
