"""`GoAway`: what a client does when a draining server answers GO_AWAY (a cold path).

Theory of operation (loop thread only), as gRPC on a GOAWAY frame and RocketMQ's
``enableReconnectForGoAway``:
- The connection that brought GO_AWAY takes no new call: the channel table forgets it (a
  batch moves off it too, `Connection.going_away`), and with the address list the draining
  address stops being the current one, so ``addr=None`` calls go to the next address.
- The calls already on it finish there: their responses still come. Once none is left, and
  none of the server's own requests on it is still being answered here, its queued answers
  are let out (bounded) and it is closed. It is watched from the first scheduling point after
  the GO_AWAY read (so the rest of that read was dispatched): its responses then pass through
  `_response`, the calls still on it that end otherwise (deadline, cancelled) are reported by
  `call_ended`, and the end of the server's requests by the connection (`divert_responses`).
- The call answered GO_AWAY is resent once, on a new connection, within its own deadline (to
  the next address with ``addr=None``); a second GO_AWAY fails it with
  `RemotingSendRequestError` (as NettyRemotingClient).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import trio

from codec import next_opaque

from ..._errors import RemotingSendRequestError
from ..._log import log

if TYPE_CHECKING:
    from codec import RemotingCommand

    from ..._observability._statistics import Counters
    from .._calling._future import GivesBack, ResponseFuture
    from .._sansio._response_table import ResponseTable
    from ._channels import ChannelTable, Target
    from ._connection import Connection

__all__ = ["GoAway", "Resender"]

FLUSH_SECONDS: Final = 5.0  # for the answers a connection told to go away still has queued


class Resender(Protocol):
    """What `GoAway` needs from its invoker."""

    @property
    def table(self) -> ResponseTable[ResponseFuture]: ...

    def response_received(self, conn: Connection, cmd: RemotingCommand) -> None: ...

    def send(self, conn: Connection, fut: ResponseFuture, deadline: float,
             permits: GivesBack | None) -> None: ...

    def fail_unsent(self, fut: ResponseFuture, exc: BaseException) -> None: ...


class GoAway:
    """GO_AWAY replies of one client endpoint (see the module docstring)."""

    def __init__(self, invoker: Resender, channels: ChannelTable, counters: Counters,
                 retry: bool) -> None:
        self._invoker = invoker
        self._channels = channels
        self._counters = counters
        self._retry = retry  # RocketMQ's enableReconnectForGoAway
        self._nursery: trio.Nursery | None = None
        # connections told to go away and watched: the opaques of their calls still pending
        self._left: dict[Connection, set[int]] = {}

    def open(self, nursery: trio.Nursery) -> None:
        """Resend and watch in ``nursery`` (the invoker's)."""
        self._nursery = nursery

    def close(self) -> None:
        """Resend no more (the loop is ending)."""
        self._nursery = None

    def received(self, fut: ResponseFuture, conn: Connection) -> bool:
        """Handle a GO_AWAY reply to ``fut`` (already out of the table); True if handled
        (resent, or failed), False if it is to be returned as data (resending disabled)."""
        self._counters.go_away += 1
        self._retire(conn)
        if not self._retry:
            return False
        target = fut.retry_target
        if fut.resent or isinstance(target, bool) or self._nursery is None:
            fut._fail(RemotingSendRequestError(
                fut.addr, "the peer is shutting down (GO_AWAY)"
                + (", also after one resend" if fut.resent else ""), going_away=True))
            return True
        fut.resent = True
        self._nursery.start_soon(self._resend, target, fut)
        return True

    async def _resend(self, target: Target, fut: ResponseFuture) -> None:
        try:
            conn = await self._channels.resolve(target, fut.deadline, fut.timeout)
        except BaseException as exc:
            self._invoker.fail_unsent(fut, exc)
            if not isinstance(exc, Exception):
                raise
            return
        fut.request = fut.request.with_opaque(next_opaque())  # never the caller's command
        log.info("request.resent", reason="go_away", opaque=fut.request.opaque,
                 peer=conn.remote_addr)
        # its permit is still held; a batch's request holds none (its batch does)
        self._invoker.send(conn, fut, fut.deadline, fut._permits)

    # ------------------------------------------------------------------ the connection

    def _retire(self, conn: Connection) -> None:
        if conn.going_away or conn.addr_key is None:  # a peer's connection to us: not ours
            return
        conn.go_away()  # also a thread's direct send, and callers waiting for room
        self._channels.forget(conn)
        self._channels.move_off(conn.addr_key)
        if self._nursery is not None:  # else shutting down: every connection closes anyway
            self._nursery.start_soon(self._watch, conn)

    async def _watch(self, conn: Connection) -> None:
        """Start watching ``conn`` (run after the read that brought GO_AWAY was handled)."""
        if not conn.closed:
            conn.divert_responses(self._response, self._settle_if_watched)
            self._settle(conn)

    def _settle(self, conn: Connection, flushed: bool = False) -> None:
        """Close ``conn`` once no call is pending on it, none of the peer's requests is being
        processed here and their answers have left (``flushed``); else note what is left."""
        invoker = self._invoker
        left = {fut.opaque for fut in invoker.table.on_connection(conn)}
        if left or conn.processing:
            self._left[conn] = left
            return
        self._left.pop(conn, None)
        if not flushed and self._nursery is not None:
            self._nursery.start_soon(self._close_when_flushed, conn)
            return
        conn.close("the peer is shutting down (GO_AWAY) and no call is left on it")

    async def _close_when_flushed(self, conn: Connection) -> None:
        """Let the answers ``conn`` queued leave (bounded), then settle it for good."""
        with trio.move_on_after(FLUSH_SECONDS):
            await conn.wait_flushed()
        if not conn.closed:
            self._settle(conn, flushed=True)

    def _settle_if_watched(self, conn: Connection) -> None:
        """None of the peer's requests is left in processing on ``conn``."""
        left = self._left.get(conn)
        if left is not None and not left:
            self._settle(conn)

    def _response(self, conn: Connection, cmd: RemotingCommand) -> None:
        """A response read from a connection told to go away."""
        self._invoker.response_received(conn, cmd)
        self._ended(conn, cmd.opaque)

    def call_ended(self, fut: ResponseFuture) -> None:
        """A call on a connection told to go away timed out or was cancelled."""
        self._ended(fut.conn, fut.opaque)

    def _ended(self, conn: Connection, opaque: int) -> None:
        left = self._left.get(conn)
        if left is not None:
            left.discard(opaque)
            if not left:  # look again: a call may have been sent on it late
                self._settle(conn)

    def connection_closed(self, conn: Connection) -> None:
        """Stop watching ``conn``."""
        self._left.pop(conn, None)
