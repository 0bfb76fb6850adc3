"""The streams an endpoint sends: `StreamProcessor` tasks and their credit windows.

Theory of operation (loop thread only):
- A request for a code served by a `StreamProcessor` reaches `StreamOpener`, an async
  processor like any other (routing, RPC hooks and interceptors apply to the opening
  request). It checks the ``streamId`` and ``credits`` fields and starts an `OutgoingStream`
  task in the endpoint's nursery, then returns None: the stream is not a request in
  processing, so it holds no ``max_requests_per_connection`` slot and graceful shutdown
  does not wait for it.
- `OutgoingStream` is the `processors.ServerStream` its processor sends with. The opening
  request is answered SUCCESS when the processor first waits for credits or sends; an
  exception before that is the opening request's answer instead (a refusal).
- Its `CreditWindow` never lets it send beyond the client's grants; `send` parks the task on
  a `trio.Event` while credits are too few. CREDIT frames (`grant`) and the processor's own
  `add_credits` wake it.
- It ends when the processor returns (END with SUCCESS), raises (END with the error's code
  and remark, logged once as ``processor.failed``), or is cancelled: by the client (CANCEL),
  by the loss of its connection, or by a draining server (END with GO_AWAY). Whichever comes
  first; the others find it gone from `OutgoingStreams`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from codec import FLAG_ONEWAY, RemotingCommand, ResponseCode, encode_frame_parts
from codec._header_numbers import INT32_MAX, INT32_MIN, header_int
from processors import AsyncRequestProcessor, StreamProcessor

from ..._errors import translate
from ..._log import log
from ..._messaging._codes import COST, CREDITS, END_CODE, STREAM_ID, StreamCode
from ..._messaging._credits import MAX_CREDITS, CreditWindow
from .._receiving._replies import FAILURES, encode_reply, failure

if TYPE_CHECKING:
    from processors import RequestContext

    from .._trio_driver._connection import Connection

__all__ = ["MAX_STREAMS_PER_CONNECTION", "OutgoingStream", "OutgoingStreams", "StreamOpener"]

# Streams one connection may have open at once: a peer cannot make us run unbounded tasks.
MAX_STREAMS_PER_CONNECTION: Final = 1024
GO_AWAY_REMARK: Final = "the server is draining: open the stream again elsewhere"




class OutgoingStream:
    """One stream being sent (implements `processors.ServerStream`)."""

    __slots__ = ("_accepted", "_conn", "_owner", "_request", "_wake", "ended", "processor",
                 "scope", "stream_id", "window")

    def __init__(self, conn: Connection, request: RemotingCommand, stream_id: int,
                 window: CreditWindow, processor: StreamProcessor,
                 owner: OutgoingStreams) -> None:
        self._conn = conn
        self._request = request
        self._owner = owner
        self.stream_id = stream_id
        self.window = window
        self.processor = processor
        self.scope = trio.CancelScope()
        self.ended = False
        self._accepted = False
        self._wake: trio.Event | None = None

    def __repr__(self) -> str:
        return f"<OutgoingStream {self.stream_id} to {self._conn.remote_addr}>"

    @property
    def credits(self) -> int:
        """Credits available now."""
        return self.window.available

    # ------------------------------------------------------------------ the processor's side

    async def wait_credits(self) -> int:
        """Wait until a credit is available; return how many are."""
        self._accept()
        await self._wait_for(1)
        return self.window.available

    async def send(self, item: RemotingCommand, cost: int = 1) -> None:
        """Send ``item`` once ``cost`` credits are available (see `processors.ServerStream`)."""
        if cost < 0:
            raise ValueError(f"an item's cost is >= 0, got {cost}")
        self._accept()
        await self._wait_for(cost)
        conn = self._conn
        # credits bound what the client holds; the water mark bounds what waits here for a
        # client that grants credits faster than its socket reads
        if conn.queued_bytes > conn.high_water:
            await conn.wait_writable()
        self._send_now(item, cost)
        # a processor that always has credits would otherwise never let the loop run others
        await trio.lowlevel.checkpoint()

    def send_nowait(self, item: RemotingCommand, cost: int = 1) -> None:
        """Send ``item`` now if ``cost`` credits are available, else raise `trio.WouldBlock`."""
        if cost < 0:
            raise ValueError(f"an item's cost is >= 0, got {cost}")
        if self.window.available < cost:
            raise trio.WouldBlock
        self._accept()
        self._send_now(item, cost)

    def add_credits(self, credits: int) -> None:
        """Grant ``credits`` from this side (see `processors.ServerStream`)."""
        self.window.grant(credits)
        self._wake_sender()

    async def _wait_for(self, cost: int) -> None:
        while self.window.available < cost:
            self._wake = wake = trio.Event()
            await wake.wait()

    def _send_now(self, item: RemotingCommand, cost: int) -> None:
        self.window.use(cost)
        item.code = StreamCode.ITEM
        item.flag |= FLAG_ONEWAY
        ext = item.ext_fields
        if ext is None:
            item.ext_fields = ext = {}
        ext[STREAM_ID] = str(self.stream_id)
        if cost != 1:
            ext[COST] = str(cost)
        try:
            frame = encode_frame_parts(item, self._owner.max_frame)
        except Exception as exc:
            self.window.available += cost  # nothing was sent
            self.window.used -= cost
            raise translate(exc, "encode", self._conn.remote_addr) from exc
        self._conn.send(frame)  # False once closed: the loss cancels this stream soon

    def _accept(self) -> None:
        # the opening request is answered SUCCESS when the processor first sends or waits,
        # not before: a processor that raises at once refuses the stream with its error
        # instead of opening one that ends at once
        if not self._accepted:
            self._accepted = True
            self._reply(RemotingCommand.create_response(ResponseCode.SUCCESS))

    def _reply(self, response: RemotingCommand) -> None:
        reply = encode_reply(self._request, response, self._owner.max_frame)
        if reply is not None and reply[0] is not None:
            self._conn.send(reply[0])

    # ------------------------------------------------------------------ the client's side

    def grant(self, credits: int) -> None:
        """A CREDIT frame: add the client's grant.

        Raises:
            ValueError: a grant out of range (the caller ends the stream).
        """
        self.window.grant(credits)
        self._wake_sender()

    def _wake_sender(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Run the processor to its end and say how the stream ended (the stream's task)."""
        conn = self._conn
        request = self._request
        outcome: RemotingCommand | None = None
        try:
            with self.scope:
                try:
                    await self.processor.process_stream(conn.ctx, request, self)
                except FAILURES as exc:
                    outcome = failure(request, exc)
                else:
                    outcome = RemotingCommand.create_response(ResponseCode.SUCCESS)
        finally:
            self._owner.forget(self)
        if outcome is not None and not self.ended:
            self.end(outcome.code, outcome.remark)

    def end(self, code: int, remark: str | None) -> None:
        """Send how the stream ended (or, if it never opened, answer its request) and cancel
        the processor if it still runs."""
        if self.ended:
            return
        self.ended = True
        self.scope.cancel()
        self._owner.forget(self)
        if not self._accepted:
            self._accepted = True
            self._reply(RemotingCommand.create_response(code, remark))
            if code != ResponseCode.SUCCESS:
                return  # refused: the request's answer says why, no stream was opened
        end = RemotingCommand.create_request(StreamCode.END, header={
            STREAM_ID: str(self.stream_id), END_CODE: str(code)})
        end.remark = remark
        end.flag |= FLAG_ONEWAY
        self._conn.send(encode_frame_parts(end))
        log.debug("stream.ended", stream_id=self.stream_id, peer=self._conn.remote_addr,
                  code=code, credits_used=self.window.used)

    def cancel(self) -> None:
        """Stop the processor, sending nothing more (the client cancelled, or the connection
        is gone)."""
        self.ended = True
        self.scope.cancel()
        self._owner.forget(self)


class OutgoingStreams:
    """The streams an endpoint sends, by connection and stream id."""

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self.open: dict[tuple[Connection, int], OutgoingStream] = {}
        self._per_conn: dict[Connection, int] = {}
        self.nursery: trio.Nursery | None = None  # the endpoint's, while it runs

    def __len__(self) -> int:
        return len(self.open)

    def start(self, conn: Connection, request: RemotingCommand,
              processor: StreamProcessor) -> RemotingCommand | None:
        """Open a stream for ``request``; return the refusal to answer instead, or None."""
        fields = request.ext_fields or {}
        raw_id, raw_credits = fields.get(STREAM_ID), fields.get(CREDITS)
        if raw_id is None or raw_credits is None:
            return _refusal(ResponseCode.INVALID_PARAMETER,
                            f"a stream request needs the int fields {STREAM_ID} and {CREDITS}")
        try:
            stream_id = header_int(STREAM_ID, raw_id, INT32_MIN, INT32_MAX)
            window = CreditWindow(header_int(CREDITS, raw_credits, 1, MAX_CREDITS))
        except ValueError as exc:
            return _refusal(ResponseCode.INVALID_PARAMETER, str(exc))
        if (conn, stream_id) in self.open:
            return _refusal(ResponseCode.INVALID_PARAMETER, f"stream {stream_id} is already open")
        if self._per_conn.get(conn, 0) >= MAX_STREAMS_PER_CONNECTION:
            return _refusal(ResponseCode.SYSTEM_BUSY, f"{MAX_STREAMS_PER_CONNECTION} streams "
                            "are open on this connection already")
        # oneway: the opening answer is what tells the client its stream exists
        if self.nursery is None or request.flag & FLAG_ONEWAY:
            return _refusal(ResponseCode.SYSTEM_ERROR, "streams need a running endpoint and "
                            "a request that is not oneway")
        stream = OutgoingStream(conn, request, stream_id, window, processor, self)
        self.open[conn, stream_id] = stream
        self._per_conn[conn] = self._per_conn.get(conn, 0) + 1
        self.nursery.start_soon(stream.run)
        log.debug("stream.opened", stream_id=stream_id, peer=conn.remote_addr,
                  code=request.code, credits=credits)
        return None

    def forget(self, stream: OutgoingStream) -> None:
        """Drop ``stream`` from the table (idempotent). Its id may be open again already, for
        a new stream of the same connection (the peer reused it once this one left the
        table, before this one's task ended): that one stays."""
        conn = stream._conn
        key = (conn, stream.stream_id)
        if self.open.get(key) is stream:
            del self.open[key]
            left = self._per_conn[conn] - 1
            if left:
                self._per_conn[conn] = left
            else:
                del self._per_conn[conn]

    def find(self, conn: Connection, stream_id: int) -> OutgoingStream | None:
        """Return the stream ``stream_id`` sent on ``conn``, if it is open."""
        return self.open.get((conn, stream_id))

    def connection_lost(self, conn: Connection) -> None:
        """Cancel the streams sent on ``conn``."""
        for stream in [s for (c, _), s in self.open.items() if c is conn]:
            stream.cancel()

    def go_away(self) -> None:
        """End every stream with GO_AWAY (the server is draining)."""
        for stream in list(self.open.values()):
            stream.end(ResponseCode.GO_AWAY, GO_AWAY_REMARK)


def _refusal(code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(code, remark)


class StreamOpener(AsyncRequestProcessor):
    """What the dispatcher runs for a code a `StreamProcessor` serves: opens the stream."""

    def __init__(self, processor: StreamProcessor, streams: OutgoingStreams) -> None:
        self.processor = processor
        self._streams = streams

    def reject_request(self) -> bool:
        return self.processor.reject_request()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        conn: Connection = ctx.channel._conn  # type: ignore[attr-defined]
        return self._streams.start(conn, request, self.processor)
