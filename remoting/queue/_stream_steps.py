"""Where a queue subscription's thread face and trio face differ: what they do on its stream.
Everything else of the queue client is written once, as steps (remoting/_steps.py); these
are its own steps, each with the thread's way (``run``) and the task's (``run_async``).

- `OpenStream`: the transport client's public ``open_stream`` (a thread gets the stream; a
  task enters the context manager, and `CloseStream` leaves it).
- `Receive`: the stream's next item until a deadline on the face's clock (`time.monotonic`
  for a thread, trio's clock for a task: the subscription reads the same one).
- `SendAck`: an ACK on the stream's connection. A thread sends it with an answer to come
  (a future: the thread does not wait for it); a task sends it oneway (one frame less: the
  loop sends it at once, and the refusals come back as notices on the stream).
- `Ask` and `Answer`: the last ACK of a closing subscription, two-way on both faces, and the
  wait for its answer (which comes once every ACK before it was applied).
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING, Any, Final

import trio

from codec import FLAG_ONEWAY

from .._errors import RemotingError

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from contextlib import AbstractAsyncContextManager

    from codec import RemotingCommand

    from .._core._calling._caller import Caller
    from .._core._calling._future import ResponseFuture
    from .._core._trio_driver._connection import Connection
    from .._faces._blocking import RemotingClient
    from .._faces._streams import BlockingStream, TrioStream
    from .._faces._trio import TrioRemotingClient

__all__ = ["TIMED_OUT", "Answer", "Ask", "CloseStream", "Opened", "OpenStream", "Receive",
           "SendAck"]

TIMED_OUT: Final = object()  # `Receive`'s result when its deadline passed first


class Opened:
    """A stream the subscription opened: the transport's stream, and (for a task) the
    context manager it entered to open it."""

    __slots__ = ("context", "stream")

    def __init__(self, stream: Any,
                 context: AbstractAsyncContextManager[TrioStream] | None) -> None:
        self.stream = stream
        self.context = context


class OpenStream:
    """A step: open a stream of ``request`` with ``credits`` and no automatic grants; its
    result is an `Opened`."""

    __slots__ = ("addr", "client", "credits", "request", "timeout")

    def __init__(self, client: RemotingClient | TrioRemotingClient, addr: str | None,
                 request: RemotingCommand, credits: int, timeout: float) -> None:
        self.client = client
        self.addr = addr
        self.request = request
        self.credits = credits
        self.timeout = timeout

    def run(self) -> Opened:
        client: RemotingClient = self.client  # type: ignore[assignment]
        return Opened(client.open_stream(self.addr, self.request, self.credits, self.timeout,
                                         auto_credit=False), None)

    async def run_async(self) -> Opened:
        client: TrioRemotingClient = self.client  # type: ignore[assignment]
        context = client.open_stream(self.addr, self.request, self.credits, self.timeout,
                                     auto_credit=False)
        return Opened(await context.__aenter__(), context)


class CloseStream:
    """A step: end an opened stream (cancelled on the server if it had not ended); its result
    is the items it had received that were not read (a task's: the notices among them count;
    a thread's ACKs are two-way, so none of its items is a notice)."""

    __slots__ = ("opened",)

    def __init__(self, opened: Opened) -> None:
        self.opened = opened

    def run(self) -> list[RemotingCommand]:
        stream: BlockingStream = self.opened.stream
        stream.close()
        return []

    async def run_async(self) -> list[RemotingCommand]:
        stream: TrioStream = self.opened.stream
        unread = list(stream._items)
        context = self.opened.context
        if context is not None:  # leaves as the context manager does: shielded, bounded
            await context.__aexit__(None, None, None)
        return unread


class Receive:
    """A step: the stream's next item (None once it has ended), or `TIMED_OUT` at
    ``deadline`` (None: none) on the face's clock.

    Raises (at the yield):
        remoting.RemotingStreamError: the stream ended with an error.
    """

    __slots__ = ("deadline", "stream")

    def __init__(self, stream: BlockingStream | TrioStream, deadline: float | None) -> None:
        self.stream = stream
        self.deadline = deadline

    def run(self) -> object:
        stream: BlockingStream = self.stream  # type: ignore[assignment]
        deadline = self.deadline
        try:
            return stream.receive(None if deadline is None else max(0.0, deadline - monotonic()))
        except TimeoutError:
            return TIMED_OUT

    def run_async(self) -> Awaitable[object]:
        stream: TrioStream = self.stream  # type: ignore[assignment]
        if self.deadline is None:
            return stream.receive()
        return self._until(stream, self.deadline)

    @staticmethod
    async def _until(stream: TrioStream, deadline: float) -> object:
        with trio.move_on_at(deadline):
            return await stream.receive()
        return TIMED_OUT


class _OnConnection:
    __slots__ = ("caller", "conn", "request", "timeout")

    def __init__(self, caller: Caller, conn: Connection, request: RemotingCommand,
                 timeout: float) -> None:
        self.caller = caller
        self.conn = conn
        self.request = request
        self.timeout = timeout


class SendAck(_OnConnection):
    """A step: send an ACK on the stream's connection ``conn``; its result is the future of
    its answer (a thread), or None (a task: sent oneway).

    Raises (at the yield):
        remoting.RemotingError: it could not be sent (the connection is gone).
    """

    __slots__ = ()

    def run(self) -> ResponseFuture:
        conn = self.conn
        return self.caller.invoke_async(conn, conn.remote_addr, self.request, self.timeout,
                                        None)

    async def run_async(self) -> None:
        conn = self.conn
        self.request.flag |= FLAG_ONEWAY
        await self.caller.ainvoke_oneway(conn, conn.remote_addr, self.request, self.timeout)
        # let the connection's writer send it now: the consumer goes on with the deliveries
        # it holds without another checkpoint, and the service's credits come back meanwhile
        await trio.lowlevel.checkpoint()


class Ask(_OnConnection):
    """A step: send a request on ``conn`` with an answer to come; its result is the future
    of the answer (on both faces).

    Raises (at the yield):
        remoting.RemotingError: it could not be sent.
    """

    __slots__ = ()

    def run(self) -> ResponseFuture:
        conn = self.conn
        return self.caller.invoke_async(conn, conn.remote_addr, self.request, self.timeout,
                                        None)

    def run_async(self) -> Awaitable[ResponseFuture]:
        conn = self.conn
        return self.caller.ainvoke_async(conn, conn.remote_addr, self.request, self.timeout,
                                         None)


class Answer:
    """A step: wait up to ``timeout`` seconds for ``fut``'s answer; no result (what it says,
    or that it failed, is read from the future)."""

    __slots__ = ("fut", "timeout")

    def __init__(self, fut: ResponseFuture, timeout: float) -> None:
        self.fut = fut
        self.timeout = timeout

    def run(self) -> None:
        try:
            self.fut.result(self.timeout)
        except (RemotingError, TimeoutError):
            pass

    async def run_async(self) -> None:
        with trio.move_on_after(self.timeout):
            try:
                await self.fut.wait()
            except RemotingError:
                pass
