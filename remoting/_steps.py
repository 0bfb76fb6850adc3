"""Steps: how a face's code is written once and run by a blocking or a trio caller.

A call of a blocking face and of its trio twin does the same things and differs only where it
waits. So it is written once, as a generator that yields each wait as a `Step` (psycopg 3
writes its protocol this way: ``generators.py``, driven by ``waiting.wait`` and
``wait_async``): the code between two yields is plain and sync, and what a yield returns is
the step's result (or the step's exception, raised at the yield). A thread runs the
generator with `drive`, which does each step with its ``run``; a trio task with
`drive_async`, which awaits what its ``run_async`` returns. The faces are then a line each::

    def send(self, address, body=None):                # BusClient (threads)
        return drive(self._send(address, body))

    async def send(self, address, body=None):          # TrioBusClient (trio)
        return await drive_async(self._send(address, body))

    def _send(self, address, body) -> Steps[None]:     # both, once
        message = self._outbound(address, body)
        response = yield Call(self._client, self._addr, send_command(message), timeout)
        self._check(response)

Where the faces truly differ (a thread's lock or a task's event; a blocking client's call or a
trio client's), the difference is one small `Step` class with both methods, in one place.
What a generator may not do: block, or await (it is sync code on both faces); hold a lock
across a yield; enter a trio cancel scope (steps do that inside ``run_async``). Cancellation
(trio's ``Cancelled``, a ``KeyboardInterrupt``) arrives at the yield as the step's exception,
so ``try/finally`` and ``except BaseException: ...; raise`` in a generator clean up as in any
function. This module imports no trio: the driver of a trio face only awaits.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, cast

if TYPE_CHECKING:
    from codec import RemotingCommand

__all__ = ["Await", "Call", "Oneway", "Step", "Steps", "drive", "drive_async"]

T = TypeVar("T")


class Step(Protocol):
    """One wait of a face's code: done by a thread (`run`) or by a trio task (`run_async`)."""

    def run(self) -> Any:
        """Wait in this thread; return the step's result."""
        ...

    def run_async(self) -> Awaitable[Any]:
        """Return what a trio task awaits for this step (an ``async def`` does; a plain
        method that returns the coroutine it would await saves a frame); it gives the
        step's result."""
        ...


Steps: TypeAlias = Generator[Step, Any, T]


def drive(steps: Steps[T]) -> T:
    """Run ``steps`` in this thread: each step it yields is done with its ``run``, and its
    result (or exception) goes back at the yield. Returns what the generator returns.

    Raises:
        Whatever the generator raises (a step's exception it does not catch included).
    """
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                step = steps.send(result)
            else:
                step = steps.throw(error)
        except StopIteration as stop:
            return cast("T", stop.value)
        try:
            result, error = step.run(), None
        except BaseException as exc:  # back to the generator, which may handle it
            result, error = None, exc


async def drive_async(steps: Steps[T]) -> T:
    """`drive` for a trio task: each step is done with ``await step.run_async()``.

    Raises:
        Whatever the generator raises; cancellation reaches it at the yield, as the step's
        ``Cancelled``.
    """
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                step = steps.send(result)
            else:
                step = steps.throw(error)
        except StopIteration as stop:
            return cast("T", stop.value)
        try:
            result, error = await step.run_async(), None
        except BaseException as exc:  # Cancelled too: the generator cleans up and re-raises
            result, error = None, exc


class _BlockingCaller(Protocol):
    def invoke_sync(self, addr: str | None, request: RemotingCommand,
                    timeout: float) -> RemotingCommand: ...

    def invoke_oneway(self, addr: str | None, request: RemotingCommand,
                      timeout: float) -> None: ...


class _TrioCaller(Protocol):
    async def invoke_sync(self, addr: str | None, request: RemotingCommand,
                          timeout: float) -> RemotingCommand: ...

    async def invoke_oneway(self, addr: str | None, request: RemotingCommand,
                            timeout: float) -> None: ...


class _Invocation:
    __slots__ = ("addr", "client", "request", "timeout")

    def __init__(self, client: object, addr: str | None, request: RemotingCommand,
                 timeout: float) -> None:
        self.client = client
        self.addr = addr
        self.request = request
        self.timeout = timeout


class Call(_Invocation):
    """A step: ``client.invoke_sync(addr, request, timeout)``; its result is the response.

    ``client`` is the face's transport client: a `RemotingClient` for a thread, a
    `TrioRemotingClient` for a trio task (the face that yields the step knows which).
    """

    __slots__ = ()

    def run(self) -> RemotingCommand:
        return cast("_BlockingCaller", self.client).invoke_sync(self.addr, self.request,
                                                                self.timeout)

    def run_async(self) -> Awaitable[RemotingCommand]:
        return cast("_TrioCaller", self.client).invoke_sync(self.addr, self.request,
                                                            self.timeout)


class Oneway(_Invocation):
    """A step: ``client.invoke_oneway(addr, request, timeout)`` (``client`` as for `Call`);
    no result."""

    __slots__ = ()

    def run(self) -> None:
        cast("_BlockingCaller", self.client).invoke_oneway(self.addr, self.request, self.timeout)

    def run_async(self) -> Awaitable[None]:
        return cast("_TrioCaller", self.client).invoke_oneway(self.addr, self.request,
                                                              self.timeout)


class Await:
    """A step: what user code returned, when it may be awaitable (an async handler's
    coroutine). A trio task awaits it; a thread cannot, so `run` closes it and raises
    ``TypeError(refusal)``."""

    __slots__ = ("awaitable", "refusal")

    def __init__(self, awaitable: Awaitable[object], refusal: str) -> None:
        self.awaitable = awaitable
        self.refusal = refusal

    def run(self) -> object:
        if inspect.iscoroutine(self.awaitable):
            self.awaitable.close()  # never awaited: no warning about it
        raise TypeError(self.refusal)

    def run_async(self) -> Awaitable[object]:
        return self.awaitable
