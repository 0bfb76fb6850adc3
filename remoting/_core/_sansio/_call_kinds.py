"""The kinds of client call, one row each: what is checked, and how RPC hooks wrap the call.

`Caller` runs every kind, on both faces, through the same two ends (`Caller._end` for the
blocking face, `Caller._aend` for the trio face); what differs between kinds is this table,
and the one method per kind that each driver has (`BlockingDriver`, `TrioDriver`). A new kind
(streams) is one more row and one more method on each driver.

- ``check`` normalises and checks the call's arguments (a wrong request or timeout fails at
  once, before any interceptor, permit or I/O); it runs again at the chain's end when
  interceptors ran, as they may have changed the call.
- ``before`` runs the client's before-hooks (for ``"async"`` it also wraps the callback so the
  after-hooks run first, on the callback executor); ``after`` runs the after-hooks on the
  outcome of the kinds that return one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from codec import FLAG_RESPONSE

from ..._checks import batch_limit, call_timeout, callback_of, requests_of, the_request
from ..._hooks import (
    run_after_hooks,
    run_after_hooks_many,
    run_before_hooks,
    run_before_hooks_many,
    with_after_hooks,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Sequence

    from codec import RemotingCommand

    from ..._errors import RemotingError
    from ..._hooks import RPCHook
    from ..._interceptors import CallKind, ClientCall
    from .._calling._future import ResponseFuture

__all__ = ["KINDS", "BlockingDriver", "CallKindRow", "DirectDriver", "DirectTrioDriver",
           "TrioDriver", "check_many_options"]


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


@dataclass(frozen=True, slots=True)
class CallKindRow:
    """One kind of call (see the module docstring)."""

    method: str  # the driver's method for this kind
    check: Callable[[ClientCall], None]
    before: Callable[[Sequence[RPCHook], ClientCall], None]
    after: Callable[[Sequence[RPCHook], ClientCall, Any], None]


def _check_answered(call: ClientCall) -> None:
    call.request = the_request(call.request)
    call.timeout = call_timeout(call.timeout)


def _check_async(call: ClientCall) -> None:
    _check_answered(call)
    call.callback = callback_of(call.callback)


def _check_oneway(call: ClientCall) -> None:
    # a request already marked oneway is fine here (the oneway bit is what this call sets);
    # only a response is refused
    call.request = the_request(call.request, FLAG_RESPONSE)
    call.timeout = call_timeout(call.timeout)


def _check_many(call: ClientCall) -> None:
    call.requests = requests_of(call.requests)
    check_many_options(call)


def check_many_options(call: ClientCall) -> None:
    """`_check_many` but the requests, checked already (a batch's check is per request)."""
    call.timeout = call_timeout(call.timeout)
    call.limit = batch_limit(call.limit)


def _before_one(hooks: Sequence[RPCHook], call: ClientCall) -> None:
    run_before_hooks(hooks, call.addr, call.request)


def _before_async(hooks: Sequence[RPCHook], call: ClientCall) -> None:
    run_before_hooks(hooks, call.addr, call.request)
    # the after-hooks see the response (or the error) before the user's callback does, on
    # the callback executor: never on the event loop, and in the order a sync call has them
    call.callback = with_after_hooks(hooks, call.request, call.callback)


def _before_many(hooks: Sequence[RPCHook], call: ClientCall) -> None:
    run_before_hooks_many(hooks, call.addr, call.requests)


def _after_response(hooks: Sequence[RPCHook], call: ClientCall, response: Any) -> None:
    run_after_hooks(hooks, call.addr, call.request, response)


def _after_results(hooks: Sequence[RPCHook], call: ClientCall, results: Any) -> None:
    run_after_hooks_many(hooks, call.addr, call.requests, results)


def _no_after(hooks: Sequence[RPCHook], call: ClientCall, outcome: Any) -> None:
    """Nothing to observe: an async call's after-hooks run in its callback, a oneway call
    has no answer."""


# The one table of call kinds: a new kind is a row here and a method on each driver.
KINDS: Final[dict[CallKind, CallKindRow]] = {
    "sync": CallKindRow("call_sync", _check_answered, _before_one, _after_response),
    "async": CallKindRow("call_async", _check_async, _before_async, _no_after),
    "oneway": CallKindRow("call_oneway", _check_oneway, _before_one, _no_after),
    "many": CallKindRow("call_many", _check_many, _before_many, _after_results),
}
