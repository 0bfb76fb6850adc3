"""`Caller`: every way to make a call, for every face, with RPC hooks and interceptors.

The faces (blocking and trio clients and servers, channel handles) only check their own state
and call `call` (blocking face, on the caller's thread) or `acall` (trio face, in the calling
task) with the kind of call. Each call becomes a `ClientCall`, is checked at once (`_checks`,
through the kind's row in `_call_kinds`: a wrong request or timeout fails here, before any
interceptor, permit or I/O), goes through the interceptors, if any, and ends in `_end` /
`_aend`: the RPC hooks, innermost, just before the driver sends it (for ``invoke_many``: the
before-hooks on every request of the batch before any is handed on, the after-hooks on each
response once the batch is done). A server calling its clients back runs no hooks (as
RocketMQ's ``NettyRemotingServer``).

The drivers do the I/O, one method per kind: the blocking face's (`ThreadCalls`, calls handed
to the loop thread; or the thread driver of a `RemotingClient` with ``io="threads"``) and the
trio face's (the `Invoker`).

One shortcut: a sync, async or oneway call that no interceptor and no RPC hook will see needs
no `ClientCall`: its arguments, checked by the same `_checks` functions as its kind's row, go
straight to the driver's own method (`_direct`: the trio face's `Invoker`; `_direct_blocking`:
the blocking face's thread driver, `DirectDriver`). The object, the row's indirections and
their frames cost about 1.7 µs of a 64-task trio call's 12 (16% of its rate; `bench/ab.py`'s
trio client rows), so the shortcut stays while it wins that much (docs/architecture.md,
Calls).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from codec import FLAG_RESPONSE

from ..._checks import batch_limit, call_timeout, callback_of, requests_of, the_request
from ..._interceptors import ClientCall, chain, chain_async
from .._sansio._call_kinds import KINDS, check_many_options

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Sequence

    from codec import RemotingCommand

    from ..._errors import RemotingError
    from ..._hooks import RPCHook
    from ..._interceptors import CallKind, ClientInterceptor
    from ._future import ResponseFuture

__all__ = ["BlockingDriver", "Caller", "DirectDriver", "DirectTrioDriver", "TrioDriver"]


class BlockingDriver(Protocol):
    """What runs a call on the blocking face, one method per kind (on the calling thread)."""

    def call_sync(self, call: ClientCall) -> RemotingCommand: ...

    def call_async(self, call: ClientCall) -> ResponseFuture: ...

    def call_oneway(self, call: ClientCall) -> None: ...

    def call_many(self, call: ClientCall) -> list[RemotingCommand | RemotingError]: ...


class DirectDriver(Protocol):
    """A blocking driver's methods for a call no interceptor and no RPC hook sees, taking
    its checked arguments instead of a `ClientCall` (`Caller._direct_blocking`)."""

    def invoke(self, target: Any, request: RemotingCommand, timeout: float,
               retry_busy: bool) -> RemotingCommand: ...

    def start_call(self, target: Any, request: RemotingCommand, timeout: float,
                   callback: Callable[[ResponseFuture], object] | None) -> ResponseFuture: ...

    def invoke_oneway(self, target: Any, request: RemotingCommand, timeout: float) -> None: ...


class DirectTrioDriver(Protocol):
    """A trio driver's methods for a call no interceptor and no RPC hook sees, taking its
    checked arguments instead of a `ClientCall` (`Caller._direct`), each returning the
    coroutine to await."""

    def invoke(self, target: Any, request: RemotingCommand, timeout: float,
               retry_busy: bool = False) -> Coroutine[Any, Any, RemotingCommand]: ...

    def start_call(self, target: Any, request: RemotingCommand, timeout: float,
                   callback: Callable[[ResponseFuture], object] | None = None
                   ) -> Coroutine[Any, Any, ResponseFuture]: ...

    def invoke_oneway(self, target: Any, request: RemotingCommand, timeout: float
                      ) -> Coroutine[Any, Any, None]: ...


class TrioDriver(Protocol):
    """What runs a call on the trio face, one method per kind (awaited in the calling task).
    A method may be a plain function returning the coroutine to await: one frame less for
    every suspension and resumption of the call (`Invoker`)."""

    def call_sync(self, call: ClientCall) -> Awaitable[RemotingCommand]: ...

    def call_async(self, call: ClientCall) -> Awaitable[ResponseFuture]: ...

    def call_oneway(self, call: ClientCall) -> Awaitable[None]: ...

    def call_many(self, call: ClientCall) -> Awaitable[list[RemotingCommand | RemotingError]]: ...


class Caller:
    """The call paths of one endpoint (see the module docstring)."""

    def __init__(self, blocking: BlockingDriver, trio: TrioDriver, hooks: list[RPCHook], *,
                 run_hooks: bool, role: str, direct_trio: DirectTrioDriver | None = None
                 ) -> None:
        self._hooks = hooks if run_hooks else []
        self._role: Any = role
        self.interceptors: list[ClientInterceptor] = []  # outermost first
        self._outer: list[ClientInterceptor] = []
        self._innermost: list[ClientInterceptor] = []
        self._chain: Callable[[ClientCall], Any] = self._end
        self._async_chain: Callable[[ClientCall], Awaitable[Any]] = self._aend
        self._drive: dict[CallKind, Callable[[ClientCall], Any]] = {}
        self._adrive: dict[CallKind, Callable[[ClientCall], Awaitable[Any]]] = {}
        self._direct_driver: DirectDriver | None = None
        self._direct_trio: DirectTrioDriver | None = None
        self.use(blocking, trio, direct_trio=direct_trio)

    def use(self, blocking: BlockingDriver, trio: TrioDriver, *,
            direct: DirectDriver | None = None,
            direct_trio: DirectTrioDriver | None = None) -> None:
        """Drive calls with ``blocking`` (blocking face) and ``trio`` (trio face);
        ``direct`` and ``direct_trio``: their methods for calls that skip their
        `ClientCall`, if they have them (the thread driver; the trio driver's `Invoker`)."""
        self._drive = {kind: getattr(blocking, row.method) for kind, row in KINDS.items()}
        self._adrive = {kind: getattr(trio, row.method) for kind, row in KINDS.items()}
        self._direct_driver = direct
        self._direct_trio = direct_trio

    def _direct(self) -> DirectTrioDriver | None:
        """The trio driver, when a trio call may skip its `ClientCall` (see the module
        docstring): nothing would see the call but the driver."""
        return None if self.interceptors or self._hooks else self._direct_trio

    def _direct_blocking(self) -> DirectDriver | None:
        """The thread driver, when a blocking call may skip its `ClientCall` (as `_direct`)."""
        return None if self.interceptors or self._hooks else self._direct_driver

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
        self._chain = chain([i.intercept_call for i in self.interceptors], self._end)
        self._async_chain = chain_async([i.intercept_call_async for i in self.interceptors],
                                        self._aend)

    def _new(self, kind: CallKind, target: Any, addr: str | None, subject: Any,
             timeout: Any, options: dict[str, Any]) -> ClientCall | None:
        """Make the checked call; None for an ``invoke_many`` of no request (nothing to do)."""
        if kind == "many":
            requests = requests_of(subject)
            if not requests:  # the other arguments are still checked
                call_timeout(timeout)
                batch_limit(options.get("limit", 1))
                return None
            call = ClientCall(kind=kind, addr=addr, request=requests[0], requests=requests,
                              timeout=timeout, role=self._role, target=target, **options)
            check_many_options(call)  # its requests were checked just above, once
            return call
        call = ClientCall(kind=kind, addr=addr, request=subject, timeout=timeout,
                          role=self._role, target=target, **options)
        KINDS[kind].check(call)
        return call

    # ------------------------------------------------------------------ the kinds, by name

    def invoke_sync(self, target: Any, addr: str | None, request: RemotingCommand,
                    timeout: float, retry_busy: bool = False) -> RemotingCommand:
        """`call` of a sync call (see `RemotingClient.invoke_sync`)."""
        if (driver := self._direct_blocking()) is not None:
            return driver.invoke(target, the_request(request), call_timeout(timeout),
                                 retry_busy)
        return self.call("sync", target, addr, request, timeout,  # type: ignore[no-any-return]
                         retry_busy=retry_busy)

    def invoke_async(self, target: Any, addr: str | None, request: RemotingCommand,
                     timeout: float, callback: Callable[[ResponseFuture], object] | None
                     ) -> ResponseFuture:
        """`call` of an async call (see `RemotingClient.invoke_async`)."""
        if (driver := self._direct_blocking()) is not None:
            return driver.start_call(target, the_request(request), call_timeout(timeout),
                                     callback_of(callback))
        return self.call("async", target, addr, request, timeout,  # type: ignore[no-any-return]
                         callback=callback)

    def invoke_oneway(self, target: Any, addr: str | None, request: RemotingCommand,
                      timeout: float) -> None:
        """`call` of a oneway call (see `RemotingClient.invoke_oneway`)."""
        if (driver := self._direct_blocking()) is not None:
            driver.invoke_oneway(target, the_request(request, FLAG_RESPONSE),
                                 call_timeout(timeout))
            return
        self.call("oneway", target, addr, request, timeout)

    def invoke_many(self, target: Any, addr: str | None,
                    requests: Sequence[RemotingCommand], timeout: float, limit: int
                    ) -> list[RemotingCommand | RemotingError]:
        """`call` of a batch (see `RemotingClient.invoke_many`)."""
        return self.call("many", target, addr, requests, timeout,  # type: ignore[no-any-return]
                         limit=limit)

    # The trio kinds return `acall`'s coroutine rather than awaiting it: one frame less on
    # the call's await chain, which every suspension and resumption passes through.

    def ainvoke_sync(self, target: Any, addr: str | None, request: RemotingCommand,
                     timeout: float, retry_busy: bool = False
                     ) -> Coroutine[Any, Any, RemotingCommand]:
        """`acall` of a sync call (see `TrioRemotingClient.invoke_sync`), to await."""
        if (invoker := self._direct()) is not None:
            return invoker.invoke(target, the_request(request), call_timeout(timeout),
                                  retry_busy)
        return self.acall("sync", target, addr, request, timeout, retry_busy=retry_busy)

    def ainvoke_async(self, target: Any, addr: str | None, request: RemotingCommand,
                      timeout: float, callback: Callable[[ResponseFuture], object] | None
                      ) -> Coroutine[Any, Any, ResponseFuture]:
        """`acall` of an async call (see `TrioRemotingClient.invoke_async`), to await."""
        if (invoker := self._direct()) is not None:
            return invoker.start_call(target, the_request(request), call_timeout(timeout),
                                      callback_of(callback))
        return self.acall("async", target, addr, request, timeout, callback=callback)

    def ainvoke_oneway(self, target: Any, addr: str | None, request: RemotingCommand,
                       timeout: float) -> Coroutine[Any, Any, None]:
        """`acall` of a oneway call (see `TrioRemotingClient.invoke_oneway`), to await."""
        if (invoker := self._direct()) is not None:
            return invoker.invoke_oneway(target, the_request(request, FLAG_RESPONSE),
                                         call_timeout(timeout))
        return self.acall("oneway", target, addr, request, timeout)

    def ainvoke_many(self, target: Any, addr: str | None,
                     requests: Sequence[RemotingCommand], timeout: float, limit: int
                     ) -> Coroutine[Any, Any, list[RemotingCommand | RemotingError]]:
        """`acall` of a batch (see `TrioRemotingClient.invoke_many`), to await."""
        return self.acall("many", target, addr, requests, timeout, limit=limit)

    # ------------------------------------------------------------------ blocking (threads)


    def call(self, kind: CallKind, target: Any, addr: str | None, subject: Any,
             timeout: Any, **options: Any) -> Any:
        """Make a call of ``kind`` on the calling thread; ``subject`` is its request (for
        ``"many"``, its requests). Returns what `ClientCall` says ``proceed`` returns.

        Raises:
            TypeError, ValueError: a wrong argument; nothing was sent.
            RemotingError: how the call failed (``"sync"`` and ``"oneway"``).
        """
        call = self._new(kind, target, addr, subject, timeout, options)
        if call is None:
            return []
        if not self.interceptors and not self._hooks:  # the common case: straight on
            return self._drive[kind](call)
        return self._chain(call)

    def _end(self, call: ClientCall) -> Any:
        row = KINDS[call.kind]
        if self.interceptors:  # they may have changed the call: check it again
            row.check(call)
        hooks: Sequence[RPCHook] = self._hooks
        if hooks:  # this call's hooks: one registered while it is in flight waits for the next
            hooks = tuple(hooks)
            row.before(hooks, call)
        outcome = self._drive[call.kind](call)
        if hooks:
            row.after(hooks, call, outcome)
        return outcome

    # ------------------------------------------------------------------ trio (the loop)


    async def acall(self, kind: CallKind, target: Any, addr: str | None, subject: Any,
                    timeout: Any, **options: Any) -> Any:
        """`call`, in the calling trio task."""
        call = self._new(kind, target, addr, subject, timeout, options)
        if call is None:
            return []
        if not self.interceptors and not self._hooks:  # the common case: no frame between
            return await self._adrive[kind](call)
        return await self._async_chain(call)

    async def _aend(self, call: ClientCall) -> Any:
        row = KINDS[call.kind]
        if self.interceptors:
            row.check(call)
        hooks: Sequence[RPCHook] = self._hooks
        if hooks:  # this call's hooks (see _end)
            hooks = tuple(hooks)
            row.before(hooks, call)
        outcome = await self._adrive[call.kind](call)
        if hooks:
            row.after(hooks, call, outcome)
        return outcome
