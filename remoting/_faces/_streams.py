"""The receiving side of a credit-based stream, for each face: `TrioStream` (``async for``, on
the client's loop) and `BlockingStream` (``for``, on any thread but the loop's).

Each is the stream's `Receiver`: the loop hands it items and the end. `TrioStream` keeps them
in a deque on the loop; `BlockingStream` in a thread-safe queue its reading thread blocks on.
As the application takes items, automatic credits (`CreditGrants`) are given back in
batches of half the first grant (Pulsar's re-flow); with ``auto_credit=False`` the
application grants them itself (`grant`), or the server's own protocol does. Leaving the
stream before its end cancels it (a CANCEL frame): the server's processor is cancelled, and
items still on their way are dropped.
"""

from __future__ import annotations

import queue
from collections import deque
from typing import TYPE_CHECKING, Any, Final, Self

import trio

from .._checks import the_request
from .._core._streams._stream_in import (
    IncomingStream,
    control_frame,
    item_cost,
    opened,
    prepare_open,
    refusal,
)
from .._errors import RemotingError
from .._log import log
from .._messaging._codes import StreamCode
from .._messaging._credits import CreditGrants, credits_of

if TYPE_CHECKING:
    from types import TracebackType

    from codec import RemotingCommand

    from .._core._endpoint import Endpoint
    from .._core._trio_driver._connection import Connection
    from .._errors import RemotingStreamError

__all__ = ["BlockingStream", "TrioStream", "open_blocking_stream", "open_trio_stream"]

CONTROL_TIMEOUT: Final = 3.0  # seconds to queue a CREDIT or CANCEL frame
CANCEL_GRACE: Final = 1.0  # seconds a trio stream's exit may spend sending its CANCEL
LOOP_ANSWER_SECONDS: Final = 10.0


class _End:
    __slots__ = ("error",)

    def __init__(self, error: RemotingStreamError | None) -> None:
        self.error = error


class _Stream:
    """What both faces share: the stream's identity, its credits, its control frames."""

    def __init__(self, endpoint: Endpoint, addr: str | None, stream_id: int, credits: int,
                 auto_credit: bool) -> None:
        self._endpoint = endpoint
        self._caller = endpoint.caller
        self.addr = addr
        self.stream_id = stream_id
        self.credits = credits
        self._grants = CreditGrants(credits) if auto_credit else None
        self._conn: Connection | None = None
        self._end: _End | None = None  # seen by the application
        self.received = 0  # items taken by the application

    def __repr__(self) -> str:
        state = "open" if self._end is None else "ended"
        return f"<{type(self).__name__} {self.stream_id} from {self.addr} {state}>"

    @property
    def ended(self) -> bool:
        """True once the application has seen the stream's end (or cancelled it)."""
        return self._end is not None

    def _took(self, item: RemotingCommand) -> int:
        """Count an item the application took; return the credits to give back now."""
        self.received += 1
        grants = self._grants
        return 0 if grants is None else grants.consumed(item_cost(item))

    def _finish(self, end: _End) -> None:
        self._end = end
        if end.error is not None:
            raise end.error


class TrioStream(_Stream):
    """A stream received by a trio client: ``async for item in stream`` (see
    `TrioRemotingClient.open_stream`). Use it on the client's own loop only."""

    def __init__(self, endpoint: Endpoint, addr: str | None, stream_id: int, credits: int,
                 auto_credit: bool) -> None:
        super().__init__(endpoint, addr, stream_id, credits, auto_credit)
        self._items: deque[RemotingCommand] = deque()
        self._closed: _End | None = None  # what the loop said
        self._wake: trio.Event | None = None

    # the Receiver side (the loop)
    def on_item(self, item: RemotingCommand) -> None:
        self._items.append(item)
        self._wake_reader()

    def on_end(self, error: RemotingStreamError | None) -> None:
        self._closed = _End(error)
        self._wake_reader()

    def _wake_reader(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    # the application's side
    async def receive(self) -> RemotingCommand | None:
        """Return the next item, waiting for it; None once the stream has ended.

        Raises:
            RemotingStreamError: the stream ended with an error (after every item before it
                was returned).
        """
        while not self._items:
            if self._end is not None:
                return None
            if self._closed is not None:
                self._finish(self._closed)
                return None
            owed = 0 if self._grants is None else self._grants.starved()
            if owed:
                await self._send(StreamCode.CREDIT, owed)
                continue
            self._wake = wake = trio.Event()
            await wake.wait()
        item = self._items.popleft()
        grant = self._took(item)
        if grant:
            await self._send(StreamCode.CREDIT, grant)
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> RemotingCommand:
        item = await self.receive()
        if item is None:
            raise StopAsyncIteration
        return item

    async def grant(self, credits: int) -> None:
        """Give the server ``credits`` more (with ``auto_credit=False``).

        Raises:
            TypeError, ValueError: ``credits`` is not 1 to 65,536.
        """
        await self._send(StreamCode.CREDIT, credits_of(credits))

    async def aclose(self) -> None:
        """Cancel the stream if it has not ended (idempotent)."""
        if self._end is not None:
            return
        self._end = _End(None)
        self._endpoint.streams.incoming.remove(self.stream_id)
        if self._closed is None:
            await self._send(StreamCode.CANCEL)

    async def _send(self, code: StreamCode, credits: int = 0) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return  # the stream is over: its end is on its way
        try:
            await self._caller.ainvoke_oneway(conn, conn.remote_addr,
                                              control_frame(code, self.stream_id, credits),
                                              CONTROL_TIMEOUT)
        except RemotingError as exc:  # the connection failed: the stream ends with it
            log.debug("stream.control_failed", stream_id=self.stream_id, error=str(exc))


async def open_trio_stream(endpoint: Endpoint, addr: str | None, request: RemotingCommand,
                           credits: object, timeout: float, auto_credit: bool) -> TrioStream:
    """Open a stream from the trio face (on the loop); see `TrioRemotingClient.open_stream`."""
    the_request(request)
    stream_id, credits = prepare_open(request, credits)
    stream = TrioStream(endpoint, addr, stream_id, credits, auto_credit)
    incoming = endpoint.streams.incoming
    incoming.add(IncomingStream(stream_id, addr, stream))
    try:
        fut = await endpoint.caller.ainvoke_async(addr, addr, request, timeout, None)
    except BaseException:
        incoming.remove(stream_id)
        raise
    try:
        await fut.wait()
    except BaseException:
        incoming.remove(stream_id)
        stream._conn = fut.conn  # the server may have opened it: cancel it there
        with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_GRACE):
            await stream._send(StreamCode.CANCEL)
        raise
    opened(fut, stream_id, incoming)
    error = refusal(fut)
    if error is not None:
        raise error
    stream._conn = fut.conn
    return stream


class BlockingStream(_Stream):
    """A stream received by a blocking client: ``for item in stream`` (see
    `RemotingClient.open_stream`); a context manager that cancels it on exit. Read it from
    one thread at a time."""

    def __init__(self, endpoint: Endpoint, addr: str | None, stream_id: int, credits: int,
                 auto_credit: bool) -> None:
        super().__init__(endpoint, addr, stream_id, credits, auto_credit)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    # the Receiver side (the loop)
    def on_item(self, item: RemotingCommand) -> None:
        self._queue.put(item)

    def on_end(self, error: RemotingStreamError | None) -> None:
        self._queue.put(_End(error))

    # the application's side
    def receive(self, timeout: float | None = None) -> RemotingCommand | None:
        """Return the next item, waiting up to ``timeout`` seconds (None: for ever); None
        once the stream has ended.

        Raises:
            TimeoutError: no item within ``timeout``; the stream goes on.
            RemotingStreamError: the stream ended with an error (after every item before it
                was returned).
        """
        if self._end is not None:
            return None
        if self._grants is not None and self._grants.owed and self._queue.empty():
            self._send(StreamCode.CREDIT, self._grants.starved())
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no item within {timeout}s") from None
        if type(item) is _End:
            self._finish(item)
            return None
        grant = self._took(item)
        if grant:
            self._send(StreamCode.CREDIT, grant)
        return item  # type: ignore[no-any-return]

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> RemotingCommand:
        item = self.receive()
        if item is None:
            raise StopIteration
        return item

    def grant(self, credits: int) -> None:
        """Give the server ``credits`` more (with ``auto_credit=False``).

        Raises:
            TypeError, ValueError: ``credits`` is not 1 to 65,536.
        """
        self._send(StreamCode.CREDIT, credits_of(credits))

    def close(self) -> None:
        """Cancel the stream if it has not ended (idempotent)."""
        self.cancel()

    def cancel(self) -> None:
        """Cancel the stream if it has not ended (idempotent)."""
        if self._end is not None:
            return
        self._end = _End(None)
        incoming = self._endpoint.streams.incoming
        stream_id = self.stream_id
        self._endpoint.call_on_loop(lambda: incoming.remove(stream_id))
        self._send(StreamCode.CANCEL)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cancel()

    def _send(self, code: StreamCode, credits: int = 0) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return
        try:
            self._caller.invoke_oneway(conn, conn.remote_addr,
                                       control_frame(code, self.stream_id, credits),
                                       CONTROL_TIMEOUT)
        except RemotingError as exc:
            log.debug("stream.control_failed", stream_id=self.stream_id, error=str(exc))


def open_blocking_stream(endpoint: Endpoint, addr: str | None, request: RemotingCommand,
                         credits: object, timeout: float, auto_credit: bool
                         ) -> BlockingStream:
    """Open a stream from the blocking face (a thread); see `RemotingClient.open_stream`."""
    the_request(request)
    stream_id, credits = prepare_open(request, credits)
    stream = BlockingStream(endpoint, addr, stream_id, credits, auto_credit)
    incoming = endpoint.streams.incoming
    record = IncomingStream(stream_id, addr, stream)
    # registered on the loop before the request can leave: items may follow its answer
    endpoint.inbox.call(lambda: incoming.add(record), LOOP_ANSWER_SECONDS)
    try:
        fut = endpoint.caller.invoke_async(addr, addr, request, timeout, None)
    except BaseException:
        endpoint.call_on_loop(lambda: incoming.remove(stream_id))
        raise
    try:
        fut.result()
    except BaseException:
        endpoint.call_on_loop(lambda: incoming.remove(stream_id))
        stream._conn = fut.conn  # the server may have opened it: cancel it there
        stream._send(StreamCode.CANCEL)
        raise
    endpoint.call_on_loop(lambda: opened(fut, stream_id, incoming))
    error = refusal(fut)
    if error is not None:
        raise error
    stream._conn = fut.conn
    return stream
