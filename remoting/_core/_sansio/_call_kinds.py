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
from typing import TYPE_CHECKING, Any, Final

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
    from collections.abc import Callable, Sequence

    from ..._hooks import RPCHook
    from ..._interceptors import CallKind, ClientCall

__all__ = ["KINDS", "CallKindRow", "check_many_options"]


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
