"""`ThreadConnection`: one socket driven by the threads that use it (the thread driver).

Theory of operation:
- It is a `ConnectionCore` (the lifecycle, the decoder and the frame in progress, the bounds
  on the peer, shared with the trio driver) driven by whichever threads use it, through two
  roles: reading (`ReadRole`, `_read_role`: one reader at a time, leader/follower: whoever
  waits reads for everyone) and sending (`ThreadSender`, `_thread_sender`: one sender at a
  time, what a burst produced leaves together).
- Reading, by the read role's holder: wait for readability with ``poll`` (until the holder's
  own deadline or the frame in progress's stall), read once (the rest of a large frame
  straight into place), and hand what it completed to the owner: the read's answers
  together, to complete their calls on this thread, then its requests together, for the
  loop that processes them (another thread). While it waits, the reader also sends what a
  full socket left (it would otherwise wait for the background reader). What senders
  queued for it (`ThreadSender`'s ``defer``) it sends after each read, before it polls again
  (``reader_polling``, set first), and as it leaves the role (once it is passed on).
- ``_mutex`` guards both roles, the followers joining, the send queue and the lifecycle
  state, and is held only around bookkeeping, never across a wait or a socket call but the
  one non-blocking send of a frame to an idle socket. Completing calls and handing requests
  over happen outside it.
- Closing (`close`, from any thread) shuts the socket, which wakes a reader waiting on it;
  the socket is released (and the owner told, which fails the calls on it) only once no
  thread reads or sends on it, by the last to leave (the move to CLOSED under the mutex is
  the claim), so a file descriptor is never reused under a thread still using it.
"""

from __future__ import annotations

import math
import select
import threading
from time import monotonic
from typing import TYPE_CHECKING, Final, Protocol

from codec import FLAG_RESPONSE, CodecError

from ..._log import log
from .._calling._future import defer_thread_wakes, thread_waiter
from .._sansio._connection_core import RECEIVE_BYTES, ConnectionCore
from ._read_role import ReadRole
from ._socket_io import poll_ms
from ._thread_sender import ThreadSender

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import EncodedFrame, RemotingCommand

    from ..._config import ConnectionSettings
    from .._calling._future import ThreadWaiter
    from ._read_role import Awaited
    from ._socket_io import IO

__all__ = ["BACKGROUND", "ThreadConnection", "ThreadConnectionOwner"]

_READ_EVENTS: Final = select.POLLIN | select.POLLPRI
BACKGROUND: Final = object()  # the background reader, as holder of the read role
_CALLER: Final = object()  # a calling thread, as holder of the read role


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
        self.calls = 0  # calls pending on it (the driver counts them, under its lock)
        self.background_events = 0  # what the background reader polls it for
        # the read role's holder waits in ``poll`` (False while it does anything else: it
        # sends what waits for it before it polls again, so a request queued for it then
        # needs no timer; see `_read_once`)
        self.reader_polling = False
        self.on_idle: Callable[[ThreadConnection], None] | None = None  # see processing_done
        self.bytes_read = 0  # changed by the read role's holder only
        self._io = io
        self.fileno = io.sock.fileno()
        self._owner = owner
        self._mutex = mutex = threading.Lock()
        self._read = ReadRole(mutex, self.state)
        self.sender = sender = ThreadSender(self, io, mutex, self.state, config)
        # the sending half's methods are the connection's: no wrapper call on the hot path
        self.send = sender.send
        self.send_many = sender.send_many
        self.hold = sender.hold
        self.flush_held = sender.flush_held
        self.send_queued = sender.send_queued
        self.flush_parked = sender.flush_parked
        self.wait_for_room = sender.wait_for_room
        self.outbound = sender.outbound
        self.low_water = sender.low_water
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
        return max(self.last_read, self.sender.last_sent)

    @property
    def bytes_written(self) -> int:
        return self.sender.bytes_written

    @property
    def writes(self) -> int:
        return self.sender.writes

    @property
    def frames_written(self) -> int:
        return self.sender.frames_written

    @property
    def read_free(self) -> bool:
        """True while no thread holds the read role (a racy hint)."""
        return self._read.holder is None

    # ------------------------------------------------------------------ what the sender asks

    @property
    def reading(self) -> bool:
        """True while a thread holds the read role."""
        return self._read.holder is not None

    def flush_soon(self) -> None:
        """Frames wait for the reader (see `SendHost`)."""
        self._owner.flush_soon(self)

    def background_wanted(self) -> None:
        """Bytes wait for a full socket (see `SendHost`)."""
        self._owner.background_wanted(self)

    def send_from_thread(self, frame: EncodedFrame) -> bool:
        """A pool thread's lone reply: never taken here (it goes back through the loop,
        which sends it with `send`)."""
        return False

    # ------------------------------------------------------------------ the read role

    def wait(self, call: Awaited, until: float, *, reading: bool = False) -> None:
        """Drive this connection from the calling thread until ``call`` is done, moves to
        another connection, or ``until`` (`time.monotonic`) passes: read for everyone while
        holding the read role (``reading``: held already, see `claim_read`), else sleep as a
        follower until the call completes or the role is handed over (`_read_role`)."""
        role = self._read
        waiter: ThreadWaiter | None = None
        following = False  # queued as a follower (or about to be), not yet out again
        try:
            while True:
                if call.done() or call.conn is not self:
                    return
                if not reading:  # take the role, or follow; then look at the call again:
                    reading = role.claim(_CALLER)  # the last reader may have ended it
                    if not reading:
                        if waiter is None:  # a leader needs none: it sees its call end
                            waiter = thread_waiter()
                            if not call._add_thread_waiter(waiter):
                                return
                        following = True
                        reading = role.lead_or_follow(waiter, call)
                        if not reading:
                            remaining = until - monotonic()
                            if remaining > 0:
                                waiter.sleep(remaining)
                            reading = role.stop_following(waiter)
                        following = False
                        if not reading and monotonic() >= until:
                            return
                    continue
                if not self.state.usable:  # closing: the last thread to leave releases it
                    return
                self._read_once(until)
                if monotonic() >= until:
                    return
        finally:
            if following and waiter is not None:  # an exception while it followed (in its
                # sleep): out of the queue, so that the role is never handed to a thread
                # gone; it may have been handed already, then it is passed on below
                reading = role.stop_following(waiter) or reading
            if waiter is not None:  # a follower's turn in the wake chain ends as it leaves
                role.wake_next()
            if reading:
                self._leave()
            if waiter is not None:
                call._remove_thread_waiter(waiter)
                waiter.reset()

    def claim_read(self) -> bool:
        """Take the read role if it is free and the connection open; True if taken (give it
        back with `release_read`, or pass ``reading=True`` to `wait`)."""
        return self._read.claim(_CALLER)

    def release_read(self) -> None:
        """Give back the read role taken with `claim_read`."""
        self._leave()

    def peek(self) -> None:
        """Read what is there now, without waiting (read role held): a close or a request
        the server sent while nobody read."""
        self._read_once(0.0)

    def read_now(self) -> None:
        """Read what is there now without waiting, if the read role is free (the background
        reader)."""
        if not self._read.claim(BACKGROUND):
            return
        try:
            self._read_once(0.0)
        finally:
            self._leave()

    def _leave(self) -> None:
        """Give up the read role: to the first follower still waiting, else free. On a
        closing connection nobody reads any more: the last thread using it releases it,
        which fails the followers' calls (and so wakes them)."""
        with self._mutex:
            usable = self.state.usable
            follower = self._read.pass_on()
            wanted = (follower is None and usable
                      and not self.background_events & select.POLLIN and self._wants_reading())
        # what was queued for this reader leaves now (nobody may read it next); looked at
        # once the role is passed on, so a request queued while it still held it is seen
        if self.sender.deferred:
            self.send_queued()
        if follower is not None:
            follower.wake()
        elif not usable:
            self.release_if_unused()
        elif wanted:
            self._owner.background_wanted(self)

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
                if self._read.holder is None and (self._wants_reading()
                                                  or monotonic() < self.unattended_until):
                    events |= _READ_EVENTS
                if self.sender.parked:
                    events |= select.POLLOUT
            self.background_events = events
            return events

    def _read_once(self, until: float) -> None:
        """Wait until readable or ``until``, read once, and hand over what it completed
        (read role held). While it waits, the reader also sends what a full socket left (it
        would otherwise wait for the background reader). A failure closes the connection."""
        io = self._io
        if not io.buffered():
            timeout = until - monotonic()
            stall_at = self.stall_at
            if stall_at is not None and stall_at <= until:
                timeout = stall_at - monotonic()
                if timeout <= 0:
                    self.stalled()
                    return
            poll = self._read_poll
            try:
                if timeout > 0:  # about to wait: a request queued for the reader from now on
                    # asks for the timer; one queued before is sent now (the flag first, then
                    # the look: one of the two sees the other, under the GIL). A look without
                    # waiting (the background reader's, a peek) sends what is queued after it,
                    # or leaving. (In the try: a failing look leaves the flag clear.)
                    self.reader_polling = True
                    if self.sender.deferred:
                        self.send_queued()
                if self.sender.parked:
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
            finally:
                self.reader_polling = False
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
        try:
            self._dispatch(monotonic())
        except CodecError as exc:
            self.codec_failed(exc)
            return
        if self.sender.deferred:
            self.send_queued()

    def _receive(self) -> int | None:
        """Receive into the decoder: the rest of a large frame straight into place, else a
        chunk. Return the count (0: end of stream; None: nothing there)."""
        decoder = self._decoder
        io = self._io
        # (``rest_in_place`` first: a read of whole frames needs no call, see ConnectionCore)
        into = self.receive_buffer(io.receives_into) if self.rest_in_place else None
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

    def _dispatch(self, now: float) -> None:
        """Hand every complete command of a read made at ``now`` to the owner: the read's
        answers together, then its server requests together. While a read of several is
        handed over, what the completions send (the next calls) only queues, and leaves
        together after. A codec error (raised after what was decoded before it is handed
        over) closes the connection. Once the connection is closed, its requests are not
        handed over. The threads several answers complete are woken once the answers are
        handled, in turn (`ReadRole.wake_answered`), before the requests are."""
        decoder = self._decoder
        owner = self._owner
        responses: list[RemotingCommand] = []
        requests: list[RemotingCommand] = []
        held = False
        try:
            while (cmd := decoder.next_command()) is not None:
                (responses if cmd.flag & FLAG_RESPONSE else requests).append(cmd)
        finally:
            # the read decoded whole: the core notes it (and its time) in one call
            self.read_handled(bool(responses or requests), now)
            if len(responses) + len(requests) > 1:
                held = self.hold()
            try:
                if len(responses) > 1:  # woken in turn, once the answers are in (`_read_role`)
                    wakes: list[ThreadWaiter] = []  # the threads the answers are to wake
                    before = defer_thread_wakes(wakes)
                    try:
                        owner.responses_received(self, responses)
                    finally:
                        defer_thread_wakes(before)
                        if wakes:  # before the read's requests and sends: no wait behind them
                            self._read.wake_answered(wakes)
                elif responses:  # one thread to wake, at once
                    owner.responses_received(self, responses)
            finally:
                try:
                    # closed by what the answers did (orphans that condemned it): nothing more
                    if requests and not self.state.closed:
                        owner.requests_received(self, requests)
                finally:
                    if held:
                        self.flush_held()

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
            self.sender.wake_room()
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
            self.sender.closing()
        self._io.shutdown()
        self.release_if_unused()

    def release_if_unused(self) -> None:
        """Release a closing connection once no thread reads or sends on it: let go of the
        socket and tell the owner. Each holder of a role calls this as it drops the role;
        whoever finds it unused first releases it (the state's move to CLOSED, under the
        mutex, is the claim), so it happens once."""
        state = self.state
        with self._mutex:
            if (state.usable or state.released or self._read.holder is not None
                    or not self.sender.idle):
                return
            state.handle("released")
            callbacks = self.outbound.clear()
            self._read.drop_followers()  # their calls fail below (connection_closed)
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
        stall_at = self.stall_at
        if stall_at is not None and now >= stall_at and self._read.free:
            self.stalled()

    def is_idle(self, now: float, idle_seconds: float) -> bool:
        """True if nothing was read or sent for ``idle_seconds`` and nothing is in
        processing, queued or being read."""
        return (not math.isinf(idle_seconds) and now - self.last_activity >= idle_seconds
                and not self.processing and not self.outbound and self._read.free
                and not self.unattended)
