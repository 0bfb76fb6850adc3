"""`Connection`: the one owner of a socket. One transport, one decoder, a reader and a writer task.

Theory of operation:
- Everything here runs on the loop thread. The connection talks to its owner (the endpoint)
  through `ConnectionOwner` only: a request or a response arrived, a read was handled, the
  connection closed.
- Reading: each read is decoded into as many commands as it completed, and each is handed to
  the owner synchronously, so requests on one connection are pipelined. While a read is
  handled, frames to send are only queued ("holding"); when it is done they leave together in
  one send (the responses of a read's requests in one write), and the owner is told
  (`read_done`), so that it hands the read's requests to processor pools together.
- An async processor runs its first step in the reader (no task switch). If it suspends, the
  reader keeps it: a suspended coroutine belongs to the task that ran it. A new reader task
  takes over and this one finishes the processor (`Suspension.finish`).
- Sending (`send`): the first frame after each read goes straight to the socket when nothing
  is queued (request/response ping-pong needs no writer pass); later ones are queued and the
  writer task sends all that is queued at once (coalescing), except that every `FLUSH_FRAMES`
  frames queued are sent at once, so the peer starts on them while this side works on.
- Back-pressure: above the high water mark, senders wait (`wait_writable`) and a server's
  reader stops reading new requests until the queue is under the low water mark. A client's
  reader never stops (it reads responses, which drain the server; both pausing would deadlock).
  With ``max_requests_per_connection`` requests in processing, a server reads no more from it.
- A frame still incomplete ``partial_frame_timeout`` seconds after it began closes the
  connection, however the bytes trickle in (slowloris).
- Any failure of the transport, or a codec error, closes this connection only; the owner then
  fails its pending requests at once (RocketMQ ``failFast``).
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any, Literal, Protocol

import trio

from codec import CodecError, ForeignProtocolError, FrameDecoder

from .._log import log
from ._outbound import FLUSH_FRAMES, Outbound, Piece
from ._receive_buffers import RECEIVE_BUFFERS
from ._transport import consume

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from codec import EncodedFrame, RemotingCommand
    from processors import Channel, RequestContext

    from .._observability._statistics import Counters
    from ._transport import Transport

__all__ = ["Connection", "ConnectionOwner", "ConnectionSettings", "Suspension"]

RECEIVE_BYTES = 256 * 1024
# A frame still missing this much is received in place (FrameDecoder.get_buffer); below it
# the usual chunked read costs no more, and reads whole runs of small frames at once.
RECEIVE_INTO_MIN_BYTES = 64 * 1024
_ids = itertools.count(1)


class Suspension(Protocol):
    """An async processor that suspended in its first step, owned by the reader that ran it."""

    def finish(self) -> Awaitable[None]:
        """Run it to the end and deliver its response."""
        ...


class ConnectionOwner(Protocol):
    """What a connection tells its owner, and nothing else."""

    def request_received(self, conn: Connection, request: RemotingCommand
                         ) -> Suspension | None:
        """Dispatch a request; a `Suspension` must be finished by the calling task."""
        ...

    def response_received(self, conn: Connection, response: RemotingCommand) -> None:
        """Complete the call ``response`` answers."""
        ...

    def read_done(self, conn: Connection) -> None:
        """Every command of one read was handed over."""
        ...

    def connection_closed(self, conn: Connection) -> None:
        """The connection is closed and its transport released."""
        ...


class ConnectionSettings(Protocol):
    """The configuration a connection reads (both configs satisfy it)."""

    @property
    def max_frame_bytes(self) -> int: ...
    @property
    def write_buffer_high_water_mark(self) -> int: ...
    @property
    def write_buffer_low_water_mark(self) -> int: ...
    @property
    def partial_frame_timeout(self) -> float: ...


class Connection:
    """A live connection to a peer, owned by an endpoint (see the module docstring)."""

    channel: Channel  # set by the owner: how processors and server push see the connection
    ctx: RequestContext  # set by the owner: what its processors receive

    def __init__(
        self, transport: Transport, remote_addr: str, owner: ConnectionOwner,
        config: ConnectionSettings, counters: Counters, *,
        role: Literal["client", "server"], addr_key: str | None = None,
        max_processing: int = 0,
        call_on_loop: Callable[[Callable[[], object]], bool] = lambda fn: False,
    ) -> None:
        self.id = next(_ids)
        self.remote_addr = remote_addr
        self.addr_key = addr_key  # the "host:port" a client dialled, else None
        self.role = role
        self.attributes: dict[str, Any] = {}
        self.closed = False
        self.broken = False
        self.close_reason: str | None = None
        self.processing = 0  # this connection's requests handed to processors
        self.abandoned = 0  # calls on it given up (timed out, cancelled): late answers expected
        self.orphans = 0  # responses on it that matched no call
        self.max_processing = max_processing
        self._now = trio.lowlevel.current_clock().current_time  # the loop's clock, bound once
        self.last_activity = self._now()
        self.high_water = config.write_buffer_high_water_mark
        self.low_water = config.write_buffer_low_water_mark
        self._transport = transport
        self._can_send_now = transport.can_send_now
        self._owner = owner
        self._on_request = owner.request_received
        self._on_response = owner.response_received
        self._counters = counters
        self._decoder = FrameDecoder(config.max_frame_bytes)
        self._partial_frame_timeout = config.partial_frame_timeout
        self._partial_since: float | None = None  # when the frame in progress began
        self._lent: bytearray | None = None  # the pooled buffer the decoder is filling
        self._out = self.outbound = Outbound()
        # Every change to ``_out`` and every socket send happens under the gate: the loop's,
        # and those of the threads that `send_from_thread` lets send on an idle connection.
        self._gate = threading.Lock()
        self._call_on_loop = call_on_loop
        # True while a burst of work is handled (a read, a batch of pool results): frames are
        # only queued, and whoever set it sends them together with `flush` afterwards.
        self.holding = False
        self._direct_budget = True  # one straight send per read
        self._send_blocked = False  # the socket was full: only the writer sends until it drained
        self._got_data = False
        self._writer_lot = trio.lowlevel.ParkingLot()
        self._writer_waits = False  # the writer is parked in _writer_lot (a flag: no call)
        self._drain_lot = trio.lowlevel.ParkingLot()
        self._flush_lot = trio.lowlevel.ParkingLot()
        self._resume_reading: trio.Event | None = None  # set when processing falls below max
        self._nursery: trio.Nursery | None = None

    def __repr__(self) -> str:
        return f"<Connection #{self.id} {self.remote_addr}{' closed' if self.closed else ''}>"

    @property
    def tls_version(self) -> str | None:
        """The TLS version in use, or None for plain TCP."""
        return self._transport.tls_version

    @property
    def queued_bytes(self) -> int:
        """Bytes queued for sending, or being sent, and not yet taken by the socket."""
        return self._out.size

    # ------------------------------------------------------------------ sending

    def send(self, frame: EncodedFrame, on_sent: Callable[[], None] | None = None) -> bool:
        """Queue ``frame`` (or send it at once, see the module docstring; loop thread).

        ``on_sent`` runs once the frame was handed to the socket, or when the connection
        closes. Returns False, doing nothing, if the connection is closed.
        """
        if self.closed:
            return False
        out = self._out
        with self._gate:
            if self.holding:
                flush = out.add(frame, on_sent) >= FLUSH_FRAMES
            elif self._direct_budget and self._can_send_now and out.idle:
                self._direct_budget = False
                self._send_direct(frame, on_sent)
                return True
            else:
                flush = out.add(frame, on_sent) >= FLUSH_FRAMES and not out.in_flight
        if flush:
            self.flush()
        elif self._writer_waits and not self.holding:
            self._writer_lot.unpark()
        return True

    def _send_direct(self, frame: EncodedFrame, on_sent: Callable[[], None] | None) -> None:
        """Hand ``frame`` to the socket now, queueing what it does not take (gate held)."""
        if isinstance(frame, tuple):
            pieces: list[Piece] = list(frame)
            size = len(frame[0]) + len(frame[1])
        else:
            pieces = [frame]
            size = len(frame)
        try:
            sent = self._transport.send_now(pieces)
        except OSError as exc:
            self._failed("write", exc)
            if on_sent is not None:
                on_sent()
            return
        counters = self._counters
        if sent:
            counters.writes += 1
        if sent == size:
            counters.frames_written += 1
            if on_sent is not None:
                on_sent()
            return
        self._out.add_rest(consume(pieces, sent), on_sent)
        self._send_blocked = True
        if self._writer_waits:
            self._writer_lot.unpark()

    def flush(self) -> None:
        """Send what is queued now, as far as the socket takes it; the writer sends the rest."""
        out = self._out
        if not out or out.in_flight or self.closed:
            return  # nothing to do, or the writer is at it and takes the rest after
        if self._can_send_now and not self._send_blocked:
            with self._gate:
                frames = out.frames
                try:
                    sent = self._transport.send_now(out.pieces)
                except OSError as exc:
                    self._failed("write", exc)
                    return
                callbacks = out.sent(sent)
            if sent:
                self._counters.writes += 1
            if callbacks is not None:
                self._counters.frames_written += frames
                for fn in callbacks:
                    fn()
                self._wake_senders()
                return
            self._send_blocked = True  # the socket is full: the writer waits for room
        if self._writer_waits:
            self._writer_lot.unpark()

    def send_from_thread(self, frame: EncodedFrame, before: Callable[[], None] | None = None
                         ) -> bool:
        """Send ``frame`` from a thread other than the loop's, if nothing is queued or being
        sent on this (plain TCP) connection; else do nothing and return False.

        ``before()`` runs first, under the gate (a call's registration: its response can
        only come after). What the socket does not take at once waits in the queue, and the
        loop is asked to wake the writer. The two users are in `_threads`.
        """
        if not self._can_send_now or self.closed:
            return False
        with self._gate:
            if self.closed or not self._out.idle:
                return False
            if before is not None:
                before()
            pieces = [frame] if type(frame) is bytes else list(frame)
            try:
                sent = self._transport.send_now(pieces)  # type: ignore[arg-type]
            except OSError:
                sent = 0  # the loop meets the error on its next read or write, and closes
            rest = consume(pieces, sent)  # type: ignore[arg-type]
            if rest:
                self._out.add_rest(rest)
        if rest:  # (if the loop has ended, its shutdown fails what was registered)
            self._call_on_loop(self._kick_writer)
        return True

    def _kick_writer(self) -> None:
        if self._out and self._writer_waits:
            self._writer_lot.unpark()

    async def wait_writable(self) -> None:
        """Wait until the outbound queue is under the high water mark (or the connection closed)."""
        while self._out.size > self.high_water and not self.closed:
            await self._drain_lot.park()

    async def wait_flushed(self) -> None:
        """Wait until everything queued so far reached the socket (or the connection closed)."""
        while not self._out.idle and not self.closed:
            await self._flush_lot.park()

    def _wake_senders(self) -> None:
        self.last_activity = self._now()
        if self._drain_lot and self._out.size <= self.low_water:
            self._drain_lot.unpark_all()
        if self._flush_lot and self._out.idle:
            self._flush_lot.unpark_all()

    async def _write(self) -> None:
        out = self._out
        transport = self._transport
        counters = self._counters
        while True:
            while not out:
                self._writer_waits = True
                try:
                    await self._writer_lot.park()
                finally:
                    self._writer_waits = False
            with self._gate:
                frames = out.frames
                pieces, callbacks = out.take()
            try:
                await transport.send_all(pieces)
            finally:
                with self._gate:
                    out.taken_done()
                self._send_blocked = False  # the socket took a whole take again
                counters.writes += 1
                counters.frames_written += frames
                for fn in callbacks:  # sent, or never will be: either way the permit is free
                    fn()
            self._wake_senders()

    # ------------------------------------------------------------------ receiving

    def processing_done(self) -> None:
        """One of this connection's requests finished processing."""
        self.processing -= 1
        resume = self._resume_reading
        if resume is not None and self.processing < self.max_processing:
            self._resume_reading = None
            resume.set()

    async def _read(self) -> None:
        pause_reading = self.role == "server"
        while True:
            suspension = self._dispatch_buffered()
            if suspension is not None:
                await self._hand_over(suspension)
                return
            limit = self.max_processing
            if limit and self.processing >= limit:
                self._resume_reading = resume = trio.Event()
                await resume.wait()
                continue
            if pause_reading and self._out.size > self.high_water:
                await self.wait_writable()
                self._partial_since = None if self._partial_since is None else self._now()
            if not await self._receive():
                return

    def _dispatch_buffered(self) -> Suspension | None:
        """Hand every complete command buffered to the owner; flush what they queued."""
        decoder = self._decoder
        limit = self.max_processing
        on_request = self._on_request
        on_response = self._on_response
        self.holding = True
        decoded = 0
        try:
            while not (limit and self.processing >= limit):
                cmd = decoder.next_command()
                if cmd is None:
                    break
                decoded += 1
                if cmd.flag & 1:
                    on_response(self, cmd)
                else:
                    suspension = on_request(self, cmd)
                    if suspension is not None:
                        return suspension
            return None
        finally:
            self.holding = False
            self._direct_budget = True
            if decoded:
                self._owner.read_done(self)
                if self._out:
                    self.flush()
            if self._lent is not None and not decoder.holds_buffer:
                RECEIVE_BUFFERS.give(self._lent)  # its frame was decoded
                self._lent = None
            if not decoder.buffered_bytes:
                self._partial_since = None
            elif decoded or self._partial_since is None:
                self._partial_since = self.last_activity  # a new frame began in this read

    async def _hand_over(self, suspension: Suspension) -> None:
        try:
            assert self._nursery is not None
            self._nursery.start_soon(self._guard, self._read, "read")
        finally:
            await suspension.finish()

    async def _receive(self) -> bool:
        """Receive once into the decoder; False if the connection is to end."""
        if self._partial_since is None or not self._partial_frame_timeout:
            count = await self._receive_once()
        else:
            count = -1
            with trio.move_on_at(self._partial_since + self._partial_frame_timeout):
                count = await self._receive_once()
            if count < 0:
                log.warning("connection.stalled", conn_id=self.id, peer=self.remote_addr,
                            buffered_bytes=self._decoder.buffered_bytes,
                            timeout=self._partial_frame_timeout)
                self.close(f"partial frame not completed within {self._partial_frame_timeout}s")
                return False
        if not count:
            self.close(self._eof_reason())
            return False
        self._got_data = True
        self.last_activity = self._now()
        return True

    async def _receive_once(self) -> int:
        """Receive into the decoder: the rest of a large frame straight into place (a pooled
        buffer), else a chunk. Return the byte count (0: end of stream)."""
        decoder = self._decoder
        transport = self._transport
        if self._lent is None and (not transport.receives_into
                                   or decoder.missing_bytes < RECEIVE_INTO_MIN_BYTES):
            data = await transport.receive(RECEIVE_BYTES)
            if data:
                decoder.feed(data)
            return len(data)
        if self._lent is None:
            self._lent = RECEIVE_BUFFERS.take(decoder.missing_bytes)
            into = decoder.get_buffer(self._lent)
        else:
            into = decoder.get_buffer()
        count = await transport.receive_into(into)
        if count:
            decoder.buffer_updated(count)
        return count

    def _eof_reason(self) -> str:
        if self._decoder.buffered_bytes:
            return "peer closed the connection mid-frame"
        if not self._got_data and self.role == "client":
            return ("the server closed the connection before answering (it may require TLS, "
                    "see ClientConfig.use_tls, or refuse more connections: max_connections, "
                    "max_connections_per_ip)")
        return "peer closed the connection"

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Serve the connection until it closes; the owner is told in every case."""
        try:
            if not self.closed:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._guard, self._write, "write")
                    await self._guard(self._read, "read")
        finally:
            with self._gate:  # from here on no thread sends (send_from_thread checks, gated)
                self.closed = True
                callbacks = self._out.clear()
            self._wake_all()
            for fn in callbacks:
                fn()
            if self._lent is not None:
                self._lent = None  # the decoder may still hold it: not given back
            with trio.CancelScope(shield=True):
                try:
                    await self._transport.aclose()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
            self._owner.connection_closed(self)
            log.info("connection.closed", conn_id=self.id, peer=self.remote_addr,
                     role=self.role, reason=self.close_reason or "shut down")

    async def _guard(self, fn: Callable[[], Awaitable[None]], what: str) -> None:
        try:
            await fn()
        except CodecError as exc:
            self.broken = True
            log.warning("connection.broken", conn_id=self.id, peer=self.remote_addr,
                        error=str(exc), **({"protocol": exc.protocol}
                                           if isinstance(exc, ForeignProtocolError) else {}))
            self.close(f"not our protocol: {exc.protocol}" if isinstance(
                exc, ForeignProtocolError) else f"codec error: {exc}")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._failed(what, exc)
        except Exception as exc:  # a bug (ours or a hook's): lose this connection, not all
            self.broken = True
            log.error("connection.failed", conn_id=self.id, peer=self.remote_addr,
                      during=what, exc_info=True)
            self.close(f"{what} failed: {exc!r}")

    def _failed(self, what: str, exc: BaseException) -> None:
        if not self.closed:
            self.broken = True
            log.info("connection.broken", conn_id=self.id, peer=self.remote_addr,
                     during=what, error=repr(exc))
        self.close(f"{what} failed: {exc!r}")

    def close(self, reason: str = "closed locally") -> None:
        """Close the connection (idempotent, sync); pending requests fail right after."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        self._wake_all()

    def _wake_all(self) -> None:
        self._writer_lot.unpark_all()
        self._drain_lot.unpark_all()
        self._flush_lot.unpark_all()
        if self._resume_reading is not None:
            self._resume_reading.set()
