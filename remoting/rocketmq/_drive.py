"""Running a flow (`_flows`) on a transport client: three small drivers, the only code that
differs between the faces.

- `run_blocking`: on a `RemotingClient`, in the calling thread (the thread-driven client
  sends and reads there: no hop to another thread per call);
- `run_trio`: on a `TrioRemotingClient`, in the calling task;
- `run_callbacks`: on a `RemotingClient` without waiting: each call is ``invoke_async`` and
  the flow steps on in its callback (on the client's callback threads); ``done`` gets the
  result or the error, once.

`Calls` (several requests at once) go out as one ``invoke_many`` in the first two; the
callback driver takes single calls only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from ._flows import Calls

if TYPE_CHECKING:
    from collections.abc import Callable

    from .. import RemotingClient, ResponseFuture, TrioRemotingClient
    from ._flows import Flow

__all__ = ["run_blocking", "run_callbacks", "run_trio"]

T = TypeVar("T")


def run_blocking(flow: Flow[T], client: RemotingClient) -> T:
    """Run ``flow`` to its end on ``client`` in this thread; return its result."""
    try:
        call = next(flow)
        while True:
            if isinstance(call, Calls):
                call = flow.send(client.invoke_many(call.addr, call.requests, call.timeout,
                                                    call.limit))
                continue
            try:
                if call.oneway:
                    client.invoke_oneway(call.addr, call.request, call.timeout)
                    response = None
                else:
                    response = client.invoke_sync(call.addr, call.request, call.timeout)
            except Exception as exc:  # the flow decides what a failure means
                call = flow.throw(exc)
                continue
            call = flow.send(response)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def run_trio(flow: Flow[T], client: TrioRemotingClient) -> T:
    """Run ``flow`` to its end on ``client`` in this task; return its result."""
    try:
        call = next(flow)
        while True:
            if isinstance(call, Calls):
                call = flow.send(await client.invoke_many(call.addr, call.requests,
                                                          call.timeout, call.limit))
                continue
            try:
                if call.oneway:
                    await client.invoke_oneway(call.addr, call.request, call.timeout)
                    response = None
                else:
                    response = await client.invoke_sync(call.addr, call.request, call.timeout)
            except Exception as exc:
                call = flow.throw(exc)
                continue
            call = flow.send(response)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def run_callbacks(flow: Flow[T], client: RemotingClient,
                  done: Callable[[T | None, BaseException | None], None]) -> None:
    """Start ``flow`` on ``client`` without waiting; ``done(result, error)`` runs once, on
    the client's callback threads (or in this thread if the flow ends before any call)."""
    _Stepper(flow, client, done).step(None, None)


class _Stepper:
    __slots__ = ("_client", "_done", "_flow")

    def __init__(self, flow: Flow[Any], client: RemotingClient,
                 done: Callable[[Any, BaseException | None], None]) -> None:
        self._flow = flow
        self._client = client
        self._done = done

    def step(self, response: Any, error: BaseException | None) -> None:
        """Advance the flow with ``response`` (or ``error``) until it waits for a call."""
        first = response is None and error is None
        while True:
            try:
                if error is not None:
                    call = self._flow.throw(error)
                elif first:
                    call = next(self._flow)
                    first = False
                else:
                    call = self._flow.send(response)
            except StopIteration as stop:
                self._done(stop.value, None)
                return
            except BaseException as exc:  # the flow's own failure is the caller's result
                self._done(None, exc)
                return
            response, error = None, None
            if isinstance(call, Calls):
                error = TypeError("run_callbacks runs flows of single calls only")
                continue
            try:
                if call.oneway:
                    self._client.invoke_oneway(call.addr, call.request, call.timeout)
                else:
                    self._client.invoke_async(call.addr, call.request, call.timeout,
                                              callback=self._answered)
                    return
            except Exception as exc:
                error = exc

    def _answered(self, future: ResponseFuture) -> None:
        response = future.response_command
        if response is not None:
            self.step(response, None)
            return
        error = future.cause
        if error is None:
            from .._errors import RemotingError

            error = RemotingError("the call ended without an answer")
        self.step(None, error)
