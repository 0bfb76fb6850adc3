"""`ThreadConnection`: one socket driven by the threads that use it (the thread driver).

Theory of operation (httpcore's ``_sync`` model: whoever waits reads):
- Reading is a role, held by one thread at a time (``_reader``): a thread waiting for one of
  its calls takes it if it is free and reads for everyone, handing each answer to its call
  (which wakes that call's thread) and the server's own requests to the owner; otherwise it
  queues as a follower and sleeps until its call completes or the role is handed to it. The
  reader keeps the role until its own call is done or its wait ends, then hands it to the
  first follower whose call is not done (leader/follower; those it answered are woken by
  their completion and leave); with no such follower it leaves it free, and tells the owner
  when something must still be read (calls no thread waits for, the server's requests): the
  background reader takes it then. Only the role's holder touches the decoder and the
  socket's read side, so reading needs no lock beyond taking the role.
- Sending is a role too (``_flushing``): a thread queues its frame in the `Outbound` and, if
  nobody is sending, sends what is queued at once with non-blocking sends; what the socket
  does not take is left to the background reader, which sends it as the socket drains
  (no thread ever waits to write while nobody reads). A caller waits for room below the
  high water mark before it queues (`wait_for_room`), within its deadline.
- ``_mutex`` guards the roles, joining the followers, the queue and the lifecycle state
  (`ConnectionState`), and is held only around bookkeeping, never across a wait or a
  socket call. A follower leaves the queue without it (`_stop_following`: the pop is the
  claim, which a reader handing the role on makes the same way). Completing calls and
  handing requests over happen outside it.
- Closing (`close`, from any thread) shuts the socket, which wakes a reader waiting on it;
  the socket is released (and the owner told, which fails the calls on it) only once no
  thread reads or sends on it, by the last to leave, so a file descriptor is never reused
  under a thread still using it.
- It is a `ConnectionCore` (shared with the trio driver: the lifecycle, the decoder and the
  frame in progress, the bounds on the peer: a frame still incomplete
  ``partial_frame_timeout`` seconds after it began, a codec error and responses nobody asked
  for close it) driven by the threads holding its roles.
"""

from __future__ import annotations

import math
import select
import threading
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, Protocol

from codec import FLAG_RESPONSE, CodecError

from ..._errors import RemotingTooManyRequestsError
from ..._log import log
from .._calling._future import ThreadWaiter, thread_waiter
from .._sansio._connection_core import RECEIVE_BYTES, ConnectionCore
from .._sansio._outbound import FLUSH_FRAMES, Outbound, consume
from ._socket_io import poll_ms

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import EncodedFrame, RemotingCommand

    from ..._config import ConnectionSettings
    from .._sansio._outbound import Piece
    from ._socket_io import IO

__all__ = ["BACKGROUND", "Awaited", "ThreadConnection", "ThreadConnectionOwner"]

# A request queued for the reader (`send`'s ``defer``) leaves after the reader's next read,
# or this long after it was queued at the latest (the background reader's timer).
DEFER_SECONDS: Final = 0.001
_READ_EVENTS: Final = select.POLLIN | select.POLLPRI
BACKGROUND: Final = object()  # the background reader, as holder of the read role
_CALLER: Final = object()  # a calling thread, sending
_PARKED: Final = object()  # the send role, left to the background reader (a full socket)
_BACKGROUND_SENDING: Final = object()  # the background reader, sending


class Awaited(Protocol):
    """What a thread waits for on a connection: a call's future, or a batch."""

    @property
    def conn(self) -> Any: ...

    def done(self) -> bool: ...

    def _add_thread_waiter(self, waiter: ThreadWaiter) -> bool: ...

    def _remove_thread_waiter(self, waiter: ThreadWaiter) -> None: ...


class ThreadConnectionOwner(Protocol):
    """What a thread-driven connection tells its owner."""

    @property
    def serves_requests(self) -> bool:
        """True if the server's requests are to be read at any time (processors)."""
        ...

    def responses_received(self, conn: ThreadConnection, responses: list[RemotingCommand]
                           ) -> None:
        """Complete the calls ``responses`` (one read's) answer (on the reading thread)."""
        ...

    def requests_received(self, conn: ThreadConnection, requests: list[RemotingCommand]
                          ) -> None:
        """Process the server's requests one read brought."""
        ...

    def background_wanted(self, conn: ThreadConnection) -> None:
        """Something must be read or sent on ``conn`` and no thread does it."""
        ...

    def flush_soon(self, conn: ThreadConnection) -> None:
        """Frames wait on ``conn`` for its reader: send them `DEFER_SECONDS` from now if
        it has not."""
        ...

    def connection_closed(self, conn: ThreadConnection) -> None:
        """The connection is released: fail its calls, forget it."""
        ...


class ThreadConnection(ConnectionCore):
    """A connection driven by the threads that use it (see the module docstring)."""

    def __init__(self, io: IO, remote_addr: str, owner: ThreadConnectionOwner,
                 config: ConnectionSettings, *, addr_key: str | None = None) -> None:
        # a client's connection: it never pauses its reads (max_processing 0)
        super().__init__(remote_addr, config, monotonic(), role="client", addr_key=addr_key,
                         max_processing=0)
        self.unattended = 0  # calls on it no thread waits for (the owner counts them)
        # the latest deadline of such a call sent on it (the owner sets it): the background
        # reader keeps polling it until then, answered or not, so that the next call nobody
        # waits for need not wake it (a window of `invoke_async` calls refilled by their
        # callbacks drains to none in flight between reads, again and again)
        self.unattended_until = -math.inf
        self.low_water = config.write_buffer_low_water_mark
        self.outbound = Outbound()
        self.background_events = 0  # what the background reader polls it for
        self.on_idle: Callable[[ThreadConnection], None] | None = None  # see processing_done
        # counters, each changed by one role's holder only
        self.bytes_read = 0
        self.bytes_written = 0
        self.writes = 0
        self.frames_written = 0
        self.last_sent = self.last_read
        self._io = io
        self.fileno = io.sock.fileno()
        self._owner = owner
        self._mutex = threading.Lock()
        self._room = threading.Condition(self._mutex)  # callers waiting below high water
        self._room_waiters = 0  # how many wait on it (sends notify only then: it is not free)
        self._reader: object | None = None  # who holds the read role
        # waiting threads and what each waits for, in arrival order (a dict: O(1) removal)
        self._followers: dict[ThreadWaiter, Awaited] = {}
        self._flushing: object | None = None  # who holds the send role
        self._holds = 0  # bursts being handled (a read, a batch of replies): sends only queue
        self.calls = 0  # calls pending on it (the driver counts them, under its lock)
        self._deferred = False  # frames wait in the queue for the reader (`send`'s ``defer``)
        self._budget = False  # a held burst may still send its first frame straight away
        self._read_poll = select.poll()  # used by the read role's holder only
        self._read_poll.register(self.fileno, _READ_EVENTS)

    def __repr__(self) -> str:
        return f"<ThreadConnection #{self.id} {self.remote_addr} {self.state.state.value}>"

    @property
    def tls_version(self) -> str | None:
        """The TLS version in use, or None for plain TCP."""
        return self._io.tls_version

    @property
    def queued_bytes(self) -> int:
        """Bytes queued for sending and not yet taken by the socket."""
        return self.outbound.size

    @property
    def last_activity(self) -> float:
        """When this connection last received or sent (`time.monotonic`)."""
        return max(self.last_read, self.last_sent)

    @property
    def read_free(self) -> bool:
        """True while no thread holds the read role (a racy hint)."""
        return self._reader is None

    # ------------------------------------------------------------------ waiting: the read role

    def wait(self, call: Awaited, until: float, *, reading: bool = False) -> None:
        """Drive this connection from the calling thread until ``call`` is done, moves to
        another connection, or ``until`` (`time.monotonic`) passes: read for everyone while
        holding the read role (``reading``: held already, see `claim_read`), else sleep as a
        follower until the call completes or the role is handed over."""
        waiter: ThreadWaiter | None = None
        try:
            while True:
                if call.done() or call.conn is not self:
                    return
                if not reading:  # take the role, or follow; then look at the call again:
                    reading = self.claim_read()  # the last reader may have ended it
                    if not reading:
                        if waiter is None:  # a leader needs none: it sees its call end
                            waiter = thread_waiter()
                            if not call._add_thread_waiter(waiter):
                                return
                        reading = self._lead_or_follow(waiter, call)
                        if not reading:
                            remaining = until - monotonic()
                            if remaining > 0:
                                waiter.sleep(remaining)
                            reading = self._stop_following(waiter)
                            if not reading and monotonic() >= until:
                                return
                    continue
                if not self.state.usable:  # closing: the last thread to leave releases it
                    return
                self._read_once(until)
                if monotonic() >= until:
                    return
        finally:
            if reading:
                self._leave()
            if waiter is not None:
                call._remove_thread_waiter(waiter)
                waiter.reset()

    def claim_read(self) -> bool:
        """Take the read role if it is free and the connection open; True if taken (give it
        back with `release_read`, or pass ``reading=True`` to `wait`)."""
        if self._reader is not None:  # a racy look first: taken, most of the time, when busy
            return False
        with self._mutex:
            if self._reader is None and self.state.usable:
                self._reader = _CALLER
                return True
            return False

    def release_read(self) -> None:
        """Give back the read role taken with `claim_read`."""
        self._leave()

    def peek(self) -> None:
        """Read what is there now, without waiting (read role held): a close or a request
        the server sent while nobody read."""
        self._read_once(0.0)

    def _lead_or_follow(self, waiter: ThreadWaiter, call: Awaited) -> bool:
        """Take the read role if it is free (True); else queue as a follower (on a closing
        connection too: its release fails the call, which wakes the thread)."""
        with self._mutex:
            if self._reader is None and self.state.usable:
                self._reader = waiter
                return True
            self._followers[waiter] = call
            return False

    def _stop_following(self, waiter: ThreadWaiter) -> bool:
        """Stop following; True if the role was handed to this thread meanwhile.

        A follower leaves without the mutex when it takes itself out of the queue: threads
        that one read woke together would otherwise queue up on the mutex as they leave,
        each losing the GIL while it holds it. Taking a follower out of the queue is the
        claim: one `dict.pop` (atomic under the GIL), made the same way by a leader handing
        the role on (`_next_reader`), so exactly one of them wins. If the leader did, it
        makes this thread the reader within the same hold of the mutex."""
        if self._followers.pop(waiter, None) is not None:
            return False
        with self._mutex:
            return self._reader is waiter

    def _leave(self) -> None:
        """Give up the read role: to the first follower still waiting, else free (see the
        module docstring). On a closing connection nobody reads any more: the last thread
        using it releases it, which fails the followers' calls (and so wakes them)."""
        if self._deferred:  # nobody may read it next: what waits for a reader leaves now
            self.send_queued()
        with self._mutex:
            usable = self.state.usable
            follower = None
            if self._followers and usable:
                follower = self._next_reader()
            self._reader = follower
            wanted = (follower is None and usable
                      and not self.background_events & select.POLLIN and self._wants_reading())
        if follower is not None:
            follower.wake()
        elif not usable:
            self._release_if_unused()
        elif wanted:
            self._owner.background_wanted(self)

    def _next_reader(self) -> ThreadWaiter | None:
        """Take the first follower whose call is not done yet out of the queue (mutex held).
        Those done already are woken by their completion and leave by themselves: handing
        them the role would only pass it on, one thread switch each, while nobody reads."""
        followers = self._followers
        # a copy: followers leave the queue without the mutex (`_stop_following`), so the
        # claim is the pop, and one may be gone by the time it is looked at
        for waiter, call in list(followers.items()):
            if not call.done() and followers.pop(waiter, None) is not None:
                return waiter
        return None

    def _wants_reading(self) -> bool:
        """Something must be read though no caller waits: calls nobody waits for, the
        server's requests, or the rest of a frame begun."""
        return bool(self.unattended or self._owner.serves_requests
                    or self._decoder.buffered_bytes)

    def background_mask(self) -> int:
        """What the background reader should poll this connection for now (0: nothing), and
        note it (under the mutex, against `_leave`)."""
        with self._mutex:
            events = 0
            if self.state.usable:
                if self._reader is None and (self._wants_reading()
                                             or monotonic() < self.unattended_until):
                    events |= _READ_EVENTS
                if self._flushing is _PARKED:
                    events |= select.POLLOUT
            self.background_events = events
            return events

    def read_now(self) -> None:
        """Read what is there now without waiting, if the read role is free (the background
        reader; a caller about to use a connection nobody read lately)."""
        with self._mutex:
            if self._reader is not None or not self.state.usable:
                return
            self._reader = BACKGROUND
        try:
            self._read_once(0.0)
        finally:
            self._leave()

    def _read_once(self, until: float) -> None:
        """Wait until readable or ``until``, read once, and hand over what it completed
        (read role held). While it waits, the reader also sends what a full socket left (it
        would otherwise wait for the background reader). A failure closes the connection."""
        io = self._io
        if not io.buffered():
            timeout = until - monotonic()
            stall_at = self.stall_at()
            if stall_at is not None and stall_at <= until:
                timeout = stall_at - monotonic()
                if timeout <= 0:
                    self.stalled()
                    return
            poll = self._read_poll
            if self._flushing is _PARKED:
                poll.modify(self.fileno, _READ_EVENTS | select.POLLOUT)
                try:
                    ready = poll.poll(poll_ms(timeout))
                finally:
                    poll.modify(self.fileno, _READ_EVENTS)
                if ready and ready[0][1] & select.POLLOUT:
                    self.flush_parked()
                if not ready or not ready[0][1] & ~select.POLLOUT:
                    return
            elif not poll.poll(poll_ms(timeout)):
                return
        try:
            count = self._receive()
        except OSError as exc:
            self.failed("read", exc)
            return
        if count is None:
            return
        if not count:
            self.close(self.eof_reason())
            return
        self.bytes_read += count
        self.received(monotonic())
        try:
            self._dispatch()
        except CodecError as exc:
            self.codec_failed(exc)
            return
        if self._deferred:
            self.send_queued()

    def _receive(self) -> int | None:
        """Receive into the decoder: the rest of a large frame straight into place, else a
        chunk. Return the count (0: end of stream; None: nothing there)."""
        decoder = self._decoder
        io = self._io
        into = self.receive_buffer(io.receives_into)
        if into is not None:
            count = io.recv_into(into)
            if count:
                decoder.buffer_updated(count)
            return count
        data = io.recv(RECEIVE_BYTES)
        if data:
            decoder.feed(data)
            return len(data)
        return None if data is None else 0

    def _dispatch(self) -> None:
        """Hand every complete command to the owner: the read's answers together, then its
        server requests together. While a read of several is handed over, what the
        completions send (the next calls) only queues, and leaves together after. A codec
        error (raised after what was decoded before it is handed over) closes the connection.
        Once the connection is closed, its requests are not handed over."""
        decoder = self._decoder
        owner = self._owner
        responses: list[RemotingCommand] = []
        requests: list[RemotingCommand] = []
        held = False
        try:
            while (cmd := decoder.next_command()) is not None:
                (responses if cmd.flag & FLAG_RESPONSE else requests).append(cmd)
        finally:
            if len(responses) + len(requests) > 1:
                held = self.hold()
            try:
                if responses:
                    owner.responses_received(self, responses)
            finally:
                # closed by what the answers did (orphans that condemned it): nothing more
                if requests and not self.state.closed:
                    owner.requests_received(self, requests)
                if held:
                    self.flush_held()
                self.read_handled(bool(responses or requests))

    # ------------------------------------------------------------------ sending: the send role

    def wait_for_room(self, deadline: float) -> None:
        """Wait until the queue is under the high water mark, until ``deadline``; a
        connection told GO_AWAY ends the wait at once (the call goes elsewhere).

        Raises:
            RemotingTooManyRequestsError: the peer does not drain the queue in time.
        """
        if self.outbound.size <= self.high_water:
            return
        with self._room:
            while self.outbound.size > self.high_water and self.state.takes_calls:
                remaining = deadline - monotonic()
                if remaining <= 0:
                    raise RemotingTooManyRequestsError(
                        f"{self.outbound.size} bytes wait to be sent to a peer that is not "
                        f"reading (high water mark {self.high_water})", self.remote_addr)
                self._room_waiters += 1
                try:
                    self._room.wait(min(remaining, threading.TIMEOUT_MAX))
                finally:
                    self._room_waiters -= 1

    def send(self, frame: EncodedFrame, on_sent: Callable[[], None] | None = None, *,
             defer: bool = False) -> bool:
        """Queue ``frame`` and send what is queued now unless another thread is sending
        (which sends it too); never waits. ``on_sent`` runs once the frame was handed to the
        socket, or the connection closed. False, doing nothing, if it is closing.

        ``defer`` (a call's request): while other calls on this connection are in flight and
        a thread reads it, only queue the frame: the reader sends what is queued after its
        next read (an answer is due), so calls made while others are in flight leave
        together, and the peer gets them together; the background reader sends it
        `DEFER_SECONDS` later at the latest."""
        out = self.outbound
        first = False
        with self._mutex:
            if not self.state.usable:
                return False
            if defer and self._flushing is None and self.calls > 1 and (
                    self._reader is not None or self.background_events & select.POLLIN):
                queued = out.add(frame, on_sent)
                first = not self._deferred
                self._deferred = True
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
            self._owner.flush_soon(self)
            return True
        if not direct:
            self._flush()
        elif error is not None:
            self.failed("write", error)
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
            if not self.state.usable:
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

    def send_from_thread(self, frame: EncodedFrame) -> bool:
        """A pool thread's lone reply: never taken here (it goes back through the loop,
        which sends it with `send`)."""
        return False

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
                    or not self.state.usable):
                return
            self._flushing = _CALLER
        self._flush()

    def send_queued(self) -> None:
        """Send what is queued if nobody is sending (deferred frames; any thread)."""
        with self._mutex:
            if (self._flushing is not None or self._holds or not self.outbound
                    or not self.state.usable):
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
        while True:
            with self._mutex:
                if not self.state.usable:
                    self._flushing = None
                    break
                if not out and not io.wants_write():
                    self._flushing = None
                    self._deferred = False
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
                self.failed("write", exc)
                self._release_if_unused()
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
                hand_over = full and self.background_events & select.POLLOUT == 0
            if callbacks:
                for fn in callbacks:
                    fn()
            if full:
                if hand_over:
                    self._owner.background_wanted(self)
                return
        self._release_if_unused()

    # ------------------------------------------------------------------ the server's requests

    def processing_done(self) -> None:
        """One of the server's requests on it finished processing (the loop thread)."""
        self.processing -= 1
        if self.on_idle is not None and not self.processing:
            self.on_idle(self)

    # ------------------------------------------------------------------ closing

    def go_away(self) -> bool:
        """The peer answered GO_AWAY: take no new call (a call waiting for room here goes
        elsewhere); True if this changed the state."""
        with self._mutex:
            if not self.state.handle("go_away"):
                return False
            self._room.notify_all()
            return True

    def request_close(self, reason: str) -> bool:
        """Close from any thread (a channel handle); always True."""
        self.close(reason)
        return True

    def close(self, reason: str = "closed locally", *, broken: bool = False) -> None:
        """Close (any thread, idempotent): nothing more is read or sent; the socket is
        released, and the owner told, once no thread uses it."""
        with self._mutex:
            if not self.state.handle("close", reason, broken=broken):
                return
            if self._flushing is _PARKED:  # nobody is sending: what is queued is dropped
                self._flushing = None
            self._room.notify_all()
        self._io.shutdown()
        self._release_if_unused()

    def _release_if_unused(self) -> None:
        """Release a closing connection once no thread reads or sends on it: let go of the
        socket and tell the owner. Each holder of a role calls this as it drops the role;
        whoever finds it unused first releases it (the state's move to CLOSED, under the
        mutex, is the claim), so it happens once."""
        state = self.state
        with self._mutex:
            if (state.usable or state.released or self._reader is not None
                    or self._flushing is not None):
                return
            state.handle("released")
            callbacks = self.outbound.clear()
            self._followers.clear()  # their calls fail below (connection_closed)
        self._io.close()
        self.forget_lent()
        for fn in callbacks:
            fn()
        self._owner.connection_closed(self)
        log.info("connection.closed", conn_id=self.id, peer=self.remote_addr, role="client",
                 reason=self.state.reason or "shut down")

    def check_stalled(self, now: float) -> None:
        """Close if a frame began ``partial_frame_timeout`` ago and is still incomplete
        (the background reader's sweep; a racy read of when it began is enough)."""
        stall_at = self.stall_at()
        if stall_at is not None and now >= stall_at and self._reader is None:
            self.stalled()

    def is_idle(self, now: float, idle_seconds: float) -> bool:
        """True if nothing was read or sent for ``idle_seconds`` and nothing is in
        processing, queued or being read."""
        return (not math.isinf(idle_seconds) and now - self.last_activity >= idle_seconds
                and not self.processing and not self.outbound and self._reader is None
                and not self.unattended)
