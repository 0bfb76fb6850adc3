"""`ThreadSender`: how frames leave a thread-driven connection (the send role), and how a
batch of them leaves together.

Theory of operation:
- Sending is a role, held by one thread at a time (``_flushing``): a thread queues its frame
  in the `Outbound` and, if nobody is sending, sends what is queued at once with
  non-blocking sends. A frame for an idle socket goes straight to it, under the mutex (so
  the order holds); otherwise it is queued and the thread sending sends it with what it
  sends next. What the socket does not take is left to the background reader with the role
  (``_PARKED``), which sends it as the socket drains: no thread ever waits to write while
  nobody reads.
- A burst of work sends what it produced together: while a read of several commands is
  handed over, or a batch of replies is finished, sends only queue (`hold` ...
  `flush_held`, nesting), up to `FLUSH_FRAMES`; the burst's first frame still goes at once
  (the peer starts on it). A batch's group of requests is queued in one hold of the mutex
  and handed to the socket in one send (`send_many`).
- A call's request made while other calls on the connection are in flight and a thread
  reads it is only queued (``defer``): the reader sends what is queued after its next read
  (an answer is due), so requests made meanwhile leave together and reach the peer
  together. A reader not waiting in ``poll`` sends what was queued before it waits again or
  as it leaves the role; only a request queued while it waits (``reader_polling``), or while
  the background reader polls, sets the background reader's timer (once per batch,
  ``_timed``), which sends it `DEFER_SECONDS` later at the latest: an answer that never
  comes (a held request) cannot keep it. The holder sets its flag before it looks at the
  queue, a sender queues before it reads the flag (under the mutex): under the GIL one of
  the two sees the other.
- Back-pressure: a caller waits for room below the high water mark before it queues
  (`wait_for_room`), within its deadline; sends notify it once the queue is under the low
  water mark; a connection told GO_AWAY or closing ends the wait at once.
- The mutex is the connection's (one lock for both roles and the lifecycle); it is held
  around bookkeeping and the one non-blocking send of a frame to an idle socket, never
  across a wait.
"""

from __future__ import annotations

import select
import threading
from time import monotonic
from typing import TYPE_CHECKING, Final, Protocol

from ..._errors import RemotingTooManyRequestsError
from .._sansio._outbound import FLUSH_FRAMES, Outbound, consume

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import EncodedFrame

    from ..._config import ConnectionSettings
    from .._sansio._connection_state import ConnectionState
    from .._sansio._outbound import Piece
    from ._socket_io import IO

__all__ = ["DEFER_SECONDS", "SendHost", "ThreadSender"]

# A request queued for the reader (`ThreadSender.send`'s ``defer``) leaves after the reader's
# next read, or this long after it was queued at the latest (the background reader's timer).
DEFER_SECONDS: Final = 0.001
_CALLER: Final = object()  # a calling thread, sending
_PARKED: Final = object()  # the send role, left to the background reader (a full socket)
_BACKGROUND_SENDING: Final = object()  # the background reader, sending


class SendHost(Protocol):
    """What the sending half uses of its connection."""

    remote_addr: str
    calls: int  # calls pending on it (its driver counts them)
    background_events: int  # what the background reader polls it for

    @property
    def reading(self) -> bool:
        """True while a thread (or the background reader) holds the read role."""
        ...

    reader_polling: bool  # the read role's holder waits in ``poll`` (see the module docstring)

    def flush_soon(self) -> None:
        """Frames wait for the reader: let the background reader send them
        `DEFER_SECONDS` from now if the reader has not."""
        ...

    def background_wanted(self) -> None:
        """Bytes wait for a full socket: let the background reader send them."""
        ...

    def failed(self, what: str, exc: BaseException) -> None:
        """A send failed: close the connection."""
        ...

    def release_if_unused(self) -> None:
        """The send role was let go: release a closing connection nobody uses any more."""
        ...


class ThreadSender:
    """The sending half of one thread-driven connection (see the module docstring)."""

    def __init__(self, host: SendHost, io: IO, mutex: threading.Lock, state: ConnectionState,
                 config: ConnectionSettings) -> None:
        self._host = host
        self._io = io
        self._mutex = mutex  # the connection's
        self._state = state
        self.high_water = config.write_buffer_high_water_mark
        self.low_water = config.write_buffer_low_water_mark
        self.outbound = Outbound()
        self._room = threading.Condition(mutex)  # callers waiting below high water
        self._room_waiters = 0  # how many wait on it (sends notify only then: it is not free)
        self._flushing: object | None = None  # who holds the send role
        self._holds = 0  # bursts being handled (a read, a batch of replies): sends only queue
        self.deferred = False  # frames wait in the queue for the reader (`send`'s ``defer``)
        self._timed = False  # the background reader's timer was asked for them
        self._budget = False  # a held burst may still send its first frame straight away
        # counters, changed by the send role's holder only
        self.bytes_written = 0
        self.writes = 0
        self.frames_written = 0
        self.last_sent = monotonic()

    @property
    def parked(self) -> bool:
        """True while what is queued waits for the socket to drain (the background reader
        holds the send role)."""
        return self._flushing is _PARKED

    @property
    def idle(self) -> bool:
        """True while nobody holds the send role (mutex held for a sure answer)."""
        return self._flushing is None

    # ------------------------------------------------------------------ back-pressure

    def wait_for_room(self, deadline: float) -> None:
        """Wait until the queue is under the high water mark, until ``deadline``; a
        connection told GO_AWAY ends the wait at once (the call goes elsewhere).

        Raises:
            RemotingTooManyRequestsError: the peer does not drain the queue in time.
        """
        out = self.outbound
        if out.size <= self.high_water:
            return
        with self._room:
            while out.size > self.high_water and self._state.takes_calls:
                remaining = deadline - monotonic()
                if remaining <= 0:
                    raise RemotingTooManyRequestsError(
                        f"{out.size} bytes wait to be sent to a peer that is not "
                        f"reading (high water mark {self.high_water})", self._host.remote_addr)
                self._room_waiters += 1
                try:
                    self._room.wait(min(remaining, threading.TIMEOUT_MAX))
                finally:
                    self._room_waiters -= 1

    def wake_room(self) -> None:
        """Wake the callers waiting for room (mutex held): it was told GO_AWAY, or closes."""
        self._room.notify_all()

    def closing(self) -> None:
        """The connection closes (mutex held): what waits for the socket is dropped (nobody
        sends it any more), and callers waiting for room wake."""
        if self._flushing is _PARKED:
            self._flushing = None
        self._room.notify_all()

    # ------------------------------------------------------------------ sending

    def send(self, frame: EncodedFrame, on_sent: Callable[[], None] | None = None, *,
             defer: bool = False) -> bool:
        """Queue ``frame`` and send what is queued now unless another thread is sending
        (which sends it too); never waits. ``on_sent`` runs once the frame was handed to the
        socket, or the connection closed. False, doing nothing, if it is closing.
        ``defer``: a call's request, which may wait for the reader (module docstring)."""
        out = self.outbound
        host = self._host
        first = False
        with self._mutex:
            if not self._state.usable:
                return False
            if defer and self._flushing is None and host.calls > 1 and (
                    (held := host.reading) or host.background_events & select.POLLIN):
                queued = out.add(frame, on_sent)
                self.deferred = True
                # a timer only if no reader will look at the queue before it waits next
                # (one waiting in ``poll`` now, or the background reader's): once per batch
                first = not self._timed and (not held or host.reader_polling)
                if first:
                    self._timed = True
                direct = False
                if queued >= FLUSH_FRAMES:
                    self._flushing = _CALLER
                    first = False  # sent now, below
                elif not first:
                    return True
            elif self._flushing is not None or not out.idle or (
                    self._holds and not self._budget):
                queued = out.add(frame, on_sent)
                if self._flushing is not None or (self._holds and queued < FLUSH_FRAMES):
                    return True
                self._flushing = _CALLER
                direct = False
            else:  # nothing queued: straight to the socket, under the mutex (order holds)
                self._budget = False  # a burst's first frame goes at once: the peer starts
                direct = True
                try:
                    sent, rest = self._send_now(frame)
                except OSError as exc:
                    error: OSError | None = exc
                else:
                    error = None
                    if rest or self._io.wants_write():  # (TLS: encrypted bytes wait)
                        if rest:
                            out.add_rest(rest, on_sent)
                            on_sent = None
                        self._flushing = _CALLER
                        rest = rest or [b""]
        if first:  # the timer, set outside the mutex: it may wake the background reader
            # (a pipe write, which lets go of the GIL: threads sending meanwhile would queue
            # up on the mutex behind it)
            host.flush_soon()
            return True
        if not direct:
            self._flush()
        elif error is not None:
            host.failed("write", error)
            if on_sent is not None:
                on_sent()
        elif rest:
            self._flush()
        elif on_sent is not None:
            on_sent()
        return True

    def send_many(self, frames: list[EncodedFrame]) -> bool:
        """Queue ``frames`` (a batch's requests) and send what is queued now unless another
        thread is sending or a burst holds sends (`hold`) with fewer than `FLUSH_FRAMES`
        queued; never waits. False, doing nothing, if it is closing."""
        out = self.outbound
        with self._mutex:
            if not self._state.usable:
                return False
            queued = out.add_many(frames)
            if self._flushing is not None or (self._holds and queued < FLUSH_FRAMES):
                return True
            self._flushing = _CALLER
        self._flush()
        return True

    def _send_now(self, frame: EncodedFrame) -> tuple[int, list[Piece]]:
        """Hand ``frame`` to the socket at once (mutex held); return the bytes sent and what
        is left of it."""
        pieces: list[Piece] = [frame] if type(frame) is bytes else list(frame)  # type: ignore[arg-type]
        sent = self._io.send_now(pieces)
        if sent:
            self.writes += 1
            self.bytes_written += sent
            self.last_sent = monotonic()
        rest = consume(pieces, sent)
        if not rest:
            self.frames_written += 1
        return sent, rest

    def hold(self) -> bool:
        """Only queue (up to `FLUSH_FRAMES` frames) until the matching `flush_held`: a burst
        of work (a read, a batch of replies) sends what it produced together. Always True
        (holds nest)."""
        with self._mutex:
            self._holds += 1
            self._budget = True
            return True

    def flush_held(self) -> None:
        """End a burst begun with `hold`: send what was queued (the last burst out does)."""
        with self._mutex:
            self._holds -= 1
            if (self._holds or self._flushing is not None or not self.outbound
                    or not self._state.usable):
                return
            self._flushing = _CALLER
        self._flush()

    def send_queued(self) -> None:
        """Send what is queued if nobody is sending (deferred frames; any thread)."""
        with self._mutex:
            if (self._flushing is not None or self._holds or not self.outbound
                    or not self._state.usable):
                return
            self._flushing = _CALLER
        self._flush()

    def flush_parked(self) -> None:
        """Send what the socket takes now, for the background reader (a sender left it the
        rest, and the send role with it)."""
        with self._mutex:
            if self._flushing is not _PARKED:
                return
            self._flushing = _BACKGROUND_SENDING
        self._flush()

    def _flush(self) -> None:
        """Send what is queued until the queue is empty or the socket is full (send role
        held); a full socket leaves the role to the background reader."""
        io = self._io
        out = self.outbound
        host = self._host
        while True:
            with self._mutex:
                if not self._state.usable:
                    self._flushing = None
                    break
                if not out and not io.wants_write():
                    self._flushing = None
                    self.deferred = self._timed = False
                    if self._room_waiters:
                        self._room.notify_all()
                    return
                pieces = out.pieces
                frames = out.frames
            try:
                sent = io.send_now(pieces) if pieces else 0
                if not sent:
                    io.flush()
            except OSError as exc:
                with self._mutex:
                    self._flushing = None
                host.failed("write", exc)
                host.release_if_unused()
                return
            callbacks = None
            with self._mutex:
                if sent:
                    callbacks = out.sent(sent)
                    self.writes += 1
                    self.bytes_written += sent
                    self.last_sent = monotonic()
                    if callbacks is not None:
                        self.frames_written += frames
                    if self._room_waiters and out.size <= self.low_water:
                        self._room.notify_all()
                full = not sent and (bool(out) or io.wants_write())
                if full:  # left to the background reader, which sends as the socket drains
                    self._flushing = _PARKED
                hand_over = full and host.background_events & select.POLLOUT == 0
            if callbacks:
                for fn in callbacks:
                    fn()
            if full:
                if hand_over:
                    host.background_wanted()
                return
        host.release_if_unused()
