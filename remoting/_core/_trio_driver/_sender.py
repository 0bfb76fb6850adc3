"""`Sender`: a connection's sending half. Its queue, its writer task, and its send gate.

Theory of operation:
- `send` (loop thread): the first frame after each read goes straight to the socket when
  nothing is queued (request/response ping-pong needs no writer pass); later ones are queued
  and the writer task sends all that is queued at once (coalescing), except that every
  `FLUSH_FRAMES` frames queued are sent at once, so the peer starts on them while this side
  works on. While ``holding`` (a read, or a batch of pool results, being handled) frames are
  only queued, and whoever set it sends them together with `flush` afterwards, or leaves
  them to the writer with `flush_soon` (the bus's pushes: what one read routes to a peer
  leaves in one write).
- The gate: every change to the queue and every socket send happens under ``_gate``, a
  `threading.Lock`, held only around non-blocking steps. The loop takes it for its own sends;
  `send_from_thread` lets a processor pool's thread send its lone reply on an idle plain-TCP
  connection under it. This is the one lock a thread shares with the loop's per-connection
  state (docs/architecture.md, the thread-and-lock table). What it guards besides the queue:
  ``closed`` (set under it by `shut`), ``takes_calls`` (cleared under it by `refuse_calls`)
  and the bytes threads sent (`take_bytes_sent_by_threads`), so a thread's send either
  happened before one of these changes, completely, or sees it.
- Back-pressure: above the high water mark, `wait_writable` blocks until the queue is under
  the low water mark; `wait_flushed` until it is empty.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import trio

from .._sansio._outbound import BUNDLE_FRAMES, FLUSH_FRAMES, Outbound, consume

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import EncodedFrame

    from ..._observability._statistics import Counters
    from .._sansio._outbound import Piece
    from ._transport import Transport

__all__ = ["Bundle", "Sender"]


class Sender:
    """The sending half of one connection (see the module docstring)."""

    def __init__(self, transport: Transport, counters: Counters, *, high_water: int,
                 low_water: int, on_failure: Callable[[str, BaseException], None],
                 call_on_loop: Callable[[Callable[[], object]], bool],
                 now: Callable[[], float]) -> None:
        self.high_water = high_water
        self.low_water = low_water
        self.closed = False
        # True while a burst of work is handled (a read, a batch of pool results): frames are
        # only queued, and whoever set it sends them together with `flush` afterwards.
        self.holding = False
        # while holding, what is queued is sent once this many frames are (`FLUSH_FRAMES`;
        # `BUNDLE_FRAMES` within `Endpoint.bundled`)
        self.hold_frames = FLUSH_FRAMES
        # False once the peer answered GO_AWAY: a call from a thread is refused (under the
        # gate), and waiting for room ends (`refuse_calls`)
        self.takes_calls = True
        self.bytes_sent_by_threads = 0  # changed under the gate only (`send_from_thread`)
        self.outbound = self._out = Outbound()
        self._transport = transport
        self._can_send_now = transport.can_send_now
        self._counters = counters
        self._on_failure = on_failure
        self._call_on_loop = call_on_loop
        self._now = now
        self.last_sent = now()
        self._gate = threading.Lock()
        self._direct_budget = True  # one straight send per read
        self._send_blocked = False  # the socket was full: only the writer sends until it drained
        self._writer_lot = trio.lowlevel.ParkingLot()
        self._writer_waits = False  # the writer is parked in _writer_lot and not yet woken
        self._drain_lot = trio.lowlevel.ParkingLot()
        self._flush_lot = trio.lowlevel.ParkingLot()

    @property
    def queued_bytes(self) -> int:
        """Bytes queued for sending, or being sent, and not yet taken by the socket."""
        return self._out.size

    def read_handled(self) -> None:
        """A read was handled: the next frame may go straight to the socket again."""
        self._direct_budget = True

    def send(self, frame: EncodedFrame, on_sent: Callable[[], None] | None = None) -> bool:
        """Queue ``frame``, or send it at once (see the module docstring; loop thread).

        ``on_sent`` runs once the frame was handed to the socket, or when the connection
        closes. Returns False, doing nothing, if the connection is closed.
        """
        if self.closed:
            return False
        out = self._out
        with self._gate:
            if self.holding:
                flush = out.add(frame, on_sent) >= self.hold_frames
            elif self._direct_budget and self._can_send_now and out.idle:
                self._direct_budget = False
                self._send_direct(frame, on_sent)
                return True
            else:
                flush = out.add(frame, on_sent) >= FLUSH_FRAMES and not out.in_flight
        if flush:
            self.flush()
        elif self._writer_waits and not self.holding:
            self._wake_writer()
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
            self._on_failure("write", exc)
            if on_sent is not None:
                on_sent()
            return
        counters = self._counters
        if sent:
            counters.writes += 1
            counters.bytes_written += sent
        if sent == size:
            counters.frames_written += 1
            if on_sent is not None:
                on_sent()
            return
        self._out.add_rest(consume(pieces, sent), on_sent)
        self._send_blocked = True
        if self._writer_waits:
            self._wake_writer()

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
                    self._on_failure("write", exc)
                    return
                callbacks = out.sent(sent)
            if sent:
                self._counters.writes += 1
                self._counters.bytes_written += sent
            if callbacks is not None:
                self._counters.frames_written += frames
                for fn in callbacks:
                    fn()
                self._wake_senders()
                return
            self._send_blocked = True  # the socket is full: the writer waits for room
        if self._writer_waits:
            self._wake_writer()

    def flush_soon(self) -> None:
        """Have the writer task send what is queued once the running task lets it run (what
        is queued meanwhile leaves in the same write)."""
        if self._out and self._writer_waits:
            self._wake_writer()

    def send_from_thread(self, frame: EncodedFrame) -> bool:
        """Send ``frame`` from a thread other than the loop's, if nothing is queued or being
        sent on this (plain TCP) connection; else do nothing and return False.

        What the socket does not take at once waits in the queue, and the loop is asked to
        wake the writer. The one user is a pool thread's lone reply (`Dispatcher._run_sync`).
        """
        if not self._can_send_now or self.closed:
            return False
        with self._gate:
            if self.closed or not self._out.idle:
                return False
            pieces = [frame] if type(frame) is bytes else list(frame)
            try:
                sent = self._transport.send_now(pieces)  # type: ignore[arg-type]
            except OSError:
                sent = 0  # the loop meets the error on its next read or write, and closes
            self.bytes_sent_by_threads += sent  # only ever changed under the gate
            rest = consume(pieces, sent)  # type: ignore[arg-type]
            if rest:
                self._out.add_rest(rest)
        if rest:  # (if the loop has ended, its shutdown fails what was registered)
            self._call_on_loop(self._kick_writer)
        return True

    def refuse_calls(self) -> None:
        """Take no new call from here on (the peer answered GO_AWAY; loop thread): whoever
        waits for room for one (`wait_writable`) is woken to go elsewhere. Replies still go
        out."""
        with self._gate:
            self.takes_calls = False
        self._drain_lot.unpark_all()

    def take_bytes_sent_by_threads(self) -> int:
        """Return the bytes threads sent here since the last call, and count from zero again
        (under the gate, where threads add to it)."""
        with self._gate:
            sent, self.bytes_sent_by_threads = self.bytes_sent_by_threads, 0
        return sent

    def _wake_writer(self) -> None:
        """Wake the parked writer once: until it runs, later sends need not wake it again."""
        self._writer_waits = False
        self._writer_lot.unpark()

    def _kick_writer(self) -> None:
        if self._out and self._writer_waits:
            self._wake_writer()

    async def wait_writable(self) -> None:
        """Wait until the outbound queue is under the high water mark (or the connection closed,
        or, for a caller waiting to send a call, it takes no new call)."""
        while self._out.size > self.high_water and not self.closed and self.takes_calls:
            await self._drain_lot.park()

    async def wait_flushed(self) -> None:
        """Wait until everything queued so far reached the socket (or the connection closed)."""
        while not self._out.idle and not self.closed:
            await self._flush_lot.park()

    def _wake_senders(self) -> None:
        self.last_sent = self._now()
        if self._drain_lot and self._out.size <= self.low_water:
            self._drain_lot.unpark_all()
        if self._flush_lot and self._out.idle:
            self._flush_lot.unpark_all()

    async def run_writer(self) -> None:
        """Send whatever is queued, all of it at once, until cancelled (the writer task)."""
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
                size = out.in_flight
            try:
                await transport.send_all(pieces)
            finally:
                with self._gate:
                    out.taken_done()
                self._send_blocked = False  # the socket took a whole take again
                counters.writes += 1
                counters.bytes_written += size
                counters.frames_written += frames
                for fn in callbacks:  # sent, or never will be: either way the permit is free
                    fn()
            self._wake_senders()

    def shut(self) -> list[Callable[[], None]]:
        """Stop sending for good (the connection closed); return the callbacks of what is
        dropped. Under the gate: from here on no thread sends (`send_from_thread` checks)."""
        with self._gate:
            self.closed = True
            callbacks = self._out.clear()
        self.wake_all()
        return callbacks

    def wake_all(self) -> None:
        """Wake every waiter (the connection is closing)."""
        self._writer_lot.unpark_all()
        self._drain_lot.unpark_all()
        self._flush_lot.unpark_all()


class Bundle:
    """A context manager: within it, frames ``sender`` sends are only queued (sent early
    every `BUNDLE_FRAMES`); on leaving, the writer is woken to send them once the running
    task lets it run (`Endpoint.bundled`; loop thread). Within the connection's own read or
    batch (``holding`` already) it changes nothing: that one sends them after."""

    __slots__ = ("_mine", "_sender")

    def __init__(self, sender: Sender) -> None:
        self._sender = sender
        self._mine = False

    def __enter__(self) -> None:
        sender = self._sender
        if not sender.holding:
            self._mine = True
            sender.holding = True
            sender.hold_frames = BUNDLE_FRAMES

    def __exit__(self, *exc: object) -> None:
        if self._mine:
            sender = self._sender
            sender.holding = False
            sender.hold_frames = FLUSH_FRAMES
            sender.flush_soon()
