"""The streams an endpoint receives: where their items go, and how they are opened.

Theory of operation (the table on the loop thread only):
- A stream is opened by a request carrying ``streamId`` (a fresh id of this process) and
  ``credits``. Its `IncomingStream` is registered before the request leaves (items may follow
  the answer in the same read), and bound to the connection the request went over: items
  from any other connection are not its own.
- ITEM frames go to the stream's `Receiver` (the face the application iterates: a trio one
  on the loop, or a thread-safe queue for a blocking one); END ends it (SUCCESS: the normal
  end, else `RemotingStreamError` with the code and remark); the loss of its connection ends
  it with `RemotingStreamError` (code None). Frames of a stream no longer in the table (the
  application cancelled it) are dropped: some were on their way.
- The application gives credits back (CREDIT) and cancels (CANCEL) through the endpoint's
  `Caller`, on the stream's connection: RPC hooks sign them as any call (an ACL server
  checks them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from codec import FLAG_ONEWAY, RemotingCommand, ResponseCode, next_opaque
from codec._header_numbers import header_int

from ..._errors import RemotingStreamError
from ..._log import log
from ..._messaging._codes import COST, CREDITS, END_CODE, STREAM_ID, StreamCode
from ..._messaging._credits import credits_of

if TYPE_CHECKING:
    from .._calling._future import ResponseFuture
    from .._trio_driver._connection import Connection

__all__ = ["IncomingStream", "IncomingStreams", "Receiver", "control_frame", "item_cost",
           "opened", "prepare_open", "refusal"]


class Receiver(Protocol):
    """Where a stream's items go (called on the loop thread)."""

    def on_item(self, item: RemotingCommand) -> None:
        """One more item."""
        ...

    def on_end(self, error: RemotingStreamError | None) -> None:
        """The stream ended: normally (None), or with ``error``."""
        ...


class IncomingStream:
    """One stream being received: its id, connection and receiver."""

    __slots__ = ("addr", "conn", "receiver", "stream_id")

    def __init__(self, stream_id: int, addr: str | None, receiver: Receiver) -> None:
        self.stream_id = stream_id
        self.addr = addr
        self.receiver = receiver
        self.conn: Connection | None = None  # known once the open went out, or an item came


class IncomingStreams:
    """The streams an endpoint receives, by stream id (loop thread)."""

    def __init__(self) -> None:
        self.open: dict[int, IncomingStream] = {}
        self.dropped = 0  # frames of streams no longer open

    def __len__(self) -> int:
        return len(self.open)

    def add(self, stream: IncomingStream) -> None:
        """Register ``stream`` (before its opening request is sent)."""
        self.open[stream.stream_id] = stream

    def remove(self, stream_id: int) -> None:
        """Forget a stream (cancelled, or its opening failed); idempotent."""
        self.open.pop(stream_id, None)

    def bind(self, stream_id: int, conn: Connection | None) -> None:
        """Tie a stream to the connection its opening request went over; end it at once if
        that connection is already closed."""
        stream = self.open.get(stream_id)
        if stream is None:
            return
        if stream.conn is None:
            stream.conn = conn
        if conn is None or conn.closed:
            self._lost(stream)

    def item(self, conn: Connection, request: RemotingCommand) -> None:
        """An ITEM frame arrived on ``conn``."""
        stream = self._of(conn, request)
        if stream is not None:
            stream.receiver.on_item(request)

    def end(self, conn: Connection, request: RemotingCommand) -> None:
        """An END frame arrived on ``conn``."""
        stream = self._of(conn, request)
        if stream is None:
            return
        del self.open[stream.stream_id]
        code = _int((request.ext_fields or {}).get(END_CODE))
        if code == ResponseCode.SUCCESS:
            stream.receiver.on_end(None)
        else:
            stream.receiver.on_end(RemotingStreamError(stream.addr, code, request.remark))

    def connection_lost(self, conn: Connection) -> None:
        """End every stream received on ``conn``."""
        for stream in [s for s in self.open.values() if s.conn is conn]:
            self._lost(stream)

    def _lost(self, stream: IncomingStream) -> None:
        self.open.pop(stream.stream_id, None)
        stream.receiver.on_end(RemotingStreamError(stream.addr, None,
                                                  "the connection closed mid-stream"))

    def _of(self, conn: Connection, request: RemotingCommand) -> IncomingStream | None:
        stream_id = _int((request.ext_fields or {}).get(STREAM_ID))
        stream = None if stream_id is None else self.open.get(stream_id)
        if stream is not None and stream.conn is None:
            stream.conn = conn  # an item came before the open's answer was read
        # a frame naming a stream opened over another connection is not its own: ids are
        # this process's opaques, so a peer could guess another connection's
        if stream is None or stream.conn is not conn:
            self.dropped += 1
            log.debug("stream.frame_dropped", code=request.code, stream_id=stream_id,
                      peer=conn.remote_addr)
            return None
        return stream


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else header_int("field", value)
    except ValueError:
        return None


def item_cost(item: RemotingCommand) -> int:
    """Return the credits ``item`` used (its ``cost`` field, default 1)."""
    ext = item.ext_fields
    if ext is not None:
        cost = ext.get(COST)
        if cost is not None:
            # a malformed cost counts as 0: fewer credits are granted back for it, which
            # can only shrink the sender's window, never let it send more than was granted
            return _int(cost) or 0
    return 1


def prepare_open(request: RemotingCommand, credits: object) -> tuple[int, int]:
    """Mark ``request`` as opening a stream; return its (stream id, credits).

    Raises:
        TypeError, ValueError: ``credits`` is not 1 to `MAX_CREDITS`; ``request`` is
            unchanged.
    """
    credits = credits_of(credits)
    # an opaque: unique in this process among streams and calls, with no second counter
    stream_id = next_opaque()
    request.add_ext_field(STREAM_ID, str(stream_id))
    request.add_ext_field(CREDITS, str(credits))
    return stream_id, credits


def control_frame(code: StreamCode, stream_id: int, credits: int = 0) -> RemotingCommand:
    """Return a CREDIT or CANCEL frame for ``stream_id``."""
    fields = {STREAM_ID: str(stream_id)}
    if code is StreamCode.CREDIT:
        fields[CREDITS] = str(credits)
    frame = RemotingCommand.create_request(code, header=fields)
    frame.flag |= FLAG_ONEWAY
    return frame


def opened(fut: ResponseFuture, stream_id: int, incoming: IncomingStreams) -> None:
    """After the opening request's answer (loop thread): bind the stream or drop it."""
    response = fut.response_command
    if response is not None and response.code == ResponseCode.SUCCESS:
        incoming.bind(stream_id, fut.conn)
    else:
        incoming.remove(stream_id)


def refusal(fut: ResponseFuture) -> RemotingStreamError | None:
    """Return the error to raise for an opening answered with an error code, else None."""
    response = fut.response_command
    if response is None or response.code == ResponseCode.SUCCESS:
        return None
    return RemotingStreamError(fut.addr, response.code, response.remark)
