"""`Streams`: an endpoint's credit-based streams, both ways, and their control frames.

The four stream frames (ITEM and END to a receiver, CREDIT and CANCEL to a sender, each a
oneway request) are handled here, synchronously in the reader, not as processors: they need
no pool, no RPC hook and no interceptor (a CREDIT or CANCEL only acts on a stream its own
connection opened, after the opening request passed the hooks). See `_stream_out` for the
sending side and `_stream_in` for the receiving one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codec import ResponseCode
from codec._header_numbers import header_int

from ..._log import FirstOfEach, log
from ..._messaging._codes import CREDITS, STREAM_ID, StreamCode
from ..._messaging._credits import MAX_CREDITS
from ._stream_in import IncomingStreams
from ._stream_out import OutgoingStreams, StreamOpener

if TYPE_CHECKING:
    from codec import RemotingCommand
    from processors import StreamProcessor

    from .._trio_driver._connection import Connection

__all__ = ["Streams"]


class Streams:
    """The streams an endpoint sends and receives; handles their control frames."""

    def __init__(self, max_frame: int) -> None:
        self.outgoing = OutgoingStreams(max_frame)
        self.incoming = IncomingStreams()
        self._refusals = FirstOfEach()  # bad CREDIT frames logged, once per connection

    def opener(self, processor: StreamProcessor) -> StreamOpener:
        """Return what the dispatcher runs for a code ``processor`` serves."""
        return StreamOpener(processor, self.outgoing)

    def handle(self, conn: Connection, frame: RemotingCommand) -> None:
        """Act on one stream frame received on ``conn`` (in the reader)."""
        code = frame.code
        if code == StreamCode.ITEM:
            self.incoming.item(conn, frame)
        elif code == StreamCode.END:
            self.incoming.end(conn, frame)
        else:
            fields = frame.ext_fields or {}
            try:
                stream_id = header_int(STREAM_ID, fields.get(STREAM_ID) or "")
            except ValueError:
                stream_id = -1  # matches no stream: dropped below, as an unknown one is
            stream = self.outgoing.find(conn, stream_id)
            # debug, not a warning: a CREDIT or CANCEL crossing the END that finished its
            # stream arrives for a stream that is gone, and that is no misbehaviour
            if stream is None:
                log.debug("stream.frame_dropped", code=code, stream_id=stream_id,
                          peer=conn.remote_addr)
            elif code == StreamCode.CANCEL:
                stream.cancel()
            else:
                try:
                    stream.grant(header_int(CREDITS, fields.get(CREDITS) or "", 1, MAX_CREDITS))
                except ValueError as exc:  # not an int, or out of range: a broken peer
                    if self._refusals.first(conn, "bad_credit"):
                        log.warning("stream.bad_credit", stream_id=stream_id,
                                    peer=conn.remote_addr, error=str(exc))
                    stream.end(ResponseCode.INVALID_PARAMETER, f"bad CREDIT frame: {exc}")

    def connection_lost(self, conn: Connection) -> None:
        """End the streams of ``conn``, both ways."""
        self._refusals.forget(conn)
        if self.outgoing.open:
            self.outgoing.connection_lost(conn)
        if self.incoming.open:
            self.incoming.connection_lost(conn)

    def go_away(self) -> None:
        """End the streams this endpoint sends with GO_AWAY (it is draining)."""
        self.outgoing.go_away()
