"""`ConnectionCore`: one connection as both drivers see it, with no I/O (h11's ``Connection``:
the driver pushes the bytes it received in and pulls commands out).

Theory of operation:
- The trio driver's `Connection` and the thread driver's `ThreadConnection` are a
  `ConnectionCore` each, driven by a reader task or by the threads holding its read role.
  What they share is here: who the peer is, the lifecycle (`ConnectionState`), the decoder
  and the frame in progress, and the bounds put on the peer (stalled frames, answers nobody
  asked for, codec errors). How bytes are received and commands handed over is each
  driver's: the trio reader hands each command over as it is decoded (an async processor may
  suspend it, ``max_requests_per_connection`` may pause it); a thread hands a read's answers
  to their calls together and its requests to the loop together (they run on another
  thread). Both hold their sends while a read is handed over and send what it queued after.
- Receiving: `receive_buffer` says where the rest of a large frame goes (straight into
  place, in a buffer borrowed from the process-wide pool or grown as its bytes arrive), or
  None: the driver receives a chunk and feeds it to ``decoder``. `received` notes the bytes
  and the time of a read, `read_handled` what the read left behind (a borrowed buffer given
  back once its frame is decoded; when the frame in progress began) and so what the next
  read is: ``stall_at`` and ``rest_in_place``, plain attributes that only `read_handled`
  and `reading_resumed` write. A driver that decodes a read whole before handing its
  commands over (the thread driver) passes the read's time to `read_handled` instead of
  calling `received`; and reads ``rest_in_place`` before it calls `receive_buffer`, so
  that a read of whole frames costs one call here, not four (a lone blocking
  ``invoke_sync``: 155,436 -> 151,192 instructions, bench/instructions.py). Everything
  here runs on the one thread reading the connection at a time (the trio driver's reader
  task; the holder of the thread driver's read role).
- Bounds: a frame still incomplete ``partial_frame_timeout`` after it began (``stall_at``,
  `stalled`), answers nobody asked for beyond the calls given up on it (`orphaned`), bytes
  that are not our protocol (`codec_failed`) and a failed read or write (`failed`) close the
  connection, each with its reason, through the driver's `close`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from codec import ForeignProtocolError, FrameDecoder

from ..._log import log
from ._connection_state import (
    CLOSED_AT_ONCE,
    ConnectionState,
    described,
    eof_reason,
    next_connection_id,
    note_orphan,
)
from ._receive_buffers import RECEIVE_BUFFERS, memory_for_rest

if TYPE_CHECKING:
    from codec import CodecError, RemotingCommand
    from processors import Channel, RequestContext

    from ..._config import ConnectionSettings

__all__ = ["RECEIVE_BYTES", "RECEIVE_INTO_MIN_BYTES", "ConnectionCore"]

# A chunked read asks for at most this much. Kept below glibc's mmap threshold (128 KiB):
# a larger request is a fresh mmap per read, shrunk (mremap) and unmapped again, ~12 µs of
# CPU per read measured (docs/performance.md).
RECEIVE_BYTES: Final = 64 * 1024
# A frame still missing this much is received in place (FrameDecoder.get_buffer; below, a
# chunked read costs no more and takes runs of small frames at once), into at least this much
# new memory (memory_for_rest: a prefix alone commits nothing).
RECEIVE_INTO_MIN_BYTES: Final = 64 * 1024


class ConnectionCore:
    """One connection of either driver, with no I/O (see the module docstring); a driver's
    connection class adds the I/O and `close`."""

    channel: Channel  # set by the owner: how processors and listeners see the connection
    ctx: RequestContext  # set by the owner: what its processors receive

    def __init__(self, remote_addr: str, config: ConnectionSettings, now: float, *,
                 role: Literal["client", "server"], addr_key: str | None,
                 max_processing: int) -> None:
        self.id = next_connection_id()
        self.remote_addr = remote_addr
        self.addr_key = addr_key  # the "host:port" a client dialled, else None
        self.role = role
        self.attributes: dict[str, Any] = {}
        self.state = ConnectionState()  # its lifecycle (written only by its driver's class)
        self.processing = 0  # its requests handed to processors and not finished
        self.max_processing = max_processing  # 0: no bound (a client never pauses its reads)
        self.abandoned = 0  # calls on it given up (timed out, cancelled): late answers expected
        self.orphans = 0  # responses on it that matched no call
        self.overloaded = 0  # its requests refused with SYSTEM_BUSY by a full pool
        self.dropped = 0  # its requests dropped unanswered: the peer did not read (a client's)
        self.high_water = config.write_buffer_high_water_mark
        self.last_read = now  # when it last received bytes (its driver's clock)
        self._decoder = FrameDecoder(config.max_frame_bytes, config.max_header_bytes)
        self._partial_frame_timeout = config.partial_frame_timeout
        self._partial_since: float | None = None  # when the frame in progress began
        # when the frame in progress stalls (None: none in progress, or no bound)
        self.stall_at: float | None = None
        # the frame in progress misses RECEIVE_INTO_MIN_BYTES or more, or a borrowed buffer
        # holds its rest: `receive_buffer` may have memory for it (else it returns None)
        self.rest_in_place = False
        self._lent: bytearray | None = None  # the pooled buffer the decoder is filling
        self._got_data = False

    # ------------------------------------------------------------------ what it is

    @property
    def closed(self) -> bool:
        """True from the first close on (nothing more is read or sent)."""
        return self.state.closed

    @property
    def broken(self) -> bool:
        """True if it closed on a failure (transport, codec, a bug), not on purpose."""
        return self.state.broken

    @property
    def close_reason(self) -> str | None:
        """Why it closed (the first close's reason; None: shut down, or still open)."""
        return self.state.reason

    @property
    def going_away(self) -> bool:
        """True once the peer answered GO_AWAY here, also after it closed: no new call goes
        on it, and a call that waited for room on it takes another connection rather than
        failing on a closed one."""
        return self.state.told_go_away

    @property
    def tls_version(self) -> str | None:
        """The TLS version in use, or None for plain TCP (the driver's transport knows)."""
        raise NotImplementedError

    def close(self, reason: str = "closed locally", *, broken: bool = False) -> None:
        """Close (the driver's; the first close counts: its reason, whether it broke)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ receiving

    def receive_buffer(self, receives_into: bool) -> memoryview | None:
        """Where to receive next: the rest of a large frame straight into place (the
        transport ``receives_into`` memory), or None: a chunk of at most `RECEIVE_BYTES`, fed
        to the decoder."""
        if not self.rest_in_place or (self._lent is None and not receives_into):
            return None
        into, self._lent = memory_for_rest(self._decoder, self._lent, RECEIVE_INTO_MIN_BYTES)
        return into

    def received(self, now: float) -> None:
        """Bytes came in (fed to the decoder) at ``now``."""
        self._got_data = True
        self.last_read = now

    def read_handled(self, decoded: bool, received_at: float | None = None) -> None:
        """A read's commands were decoded (``decoded``: it completed at least one) and handed
        over, or are about to be: give back a borrowed buffer whose frame is decoded, note
        when the frame in progress began (a new one began in this read if it completed any),
        and so when it stalls and where its rest goes. ``received_at``: the read's time, for
        a driver that did not call `received` (see the module docstring)."""
        if received_at is not None:
            self._got_data = True
            self.last_read = received_at
        decoder = self._decoder
        if self._lent is not None and not decoder.holds_buffer:
            RECEIVE_BUFFERS.give(self._lent)  # its frame was decoded
            self._lent = None
        if not decoder.buffered_bytes:  # (reads of whole frames)
            self._partial_since = self.stall_at = None
            self.rest_in_place = False
            return
        if decoded or self._partial_since is None:
            self._partial_since = self.last_read
            self._note_stall()
        self.rest_in_place = (self._lent is not None
                              or decoder.missing_bytes >= RECEIVE_INTO_MIN_BYTES)

    def reading_resumed(self, now: float) -> None:
        """Reads paused by us, not by the peer, go on at ``now``: its clocks restart."""
        self.last_read = now
        if self._partial_since is not None:
            self._partial_since = now
            self._note_stall()

    def _note_stall(self) -> None:
        since = self._partial_since
        timeout = self._partial_frame_timeout
        self.stall_at = None if since is None or not timeout else since + timeout

    def forget_lent(self) -> None:
        """The connection is released: a buffer the decoder may still hold is never given
        back (its memory goes with the decoder)."""
        self._lent = None

    def eof_reason(self) -> str:
        """Why the peer's end of stream closes it (mid-frame, before a client got any
        answer, or plainly)."""
        return eof_reason(mid_frame=bool(self._decoder.buffered_bytes),
                          got_data=self._got_data, client=self.role == "client",
                          tls=self.tls_version is not None)

    # ------------------------------------------------------------------ bounds on the peer

    def stalled(self) -> None:
        """The frame in progress did not complete in ``partial_frame_timeout``: close."""
        log.warning("connection.stalled", conn_id=self.id, peer=self.remote_addr,
                    buffered_bytes=self._decoder.buffered_bytes,
                    timeout=self._partial_frame_timeout)
        self.close(f"partial frame not completed within {self._partial_frame_timeout}s")

    def orphaned(self, response: RemotingCommand) -> None:
        """A response read here matched no call (see `note_orphan`)."""
        note_orphan(self, response)

    def codec_failed(self, exc: CodecError) -> None:
        """What the peer sent is not our protocol: close, saying which protocol if known."""
        foreign = {"protocol": exc.protocol} if isinstance(exc, ForeignProtocolError) else {}
        log.warning("connection.broken", conn_id=self.id, peer=self.remote_addr,
                    error=str(exc), **foreign)
        self.close(f"not our protocol: {foreign['protocol']}" if foreign
                   else f"codec error: {exc}", broken=True)

    def failed(self, what: str, exc: BaseException) -> None:
        """A ``what`` ("read", "write") failed with ``exc``: close, saying why in words."""
        if not self.closed:
            log.info("connection.broken", conn_id=self.id, peer=self.remote_addr,
                     during=what, error=repr(exc))
        if (what == "read" and not self._got_data and self.role == "client"
                and self.tls_version is not None):  # TLS 1.3 reports a missing client
            # certificate so: the server's alert ends the stream at the first read
            alert = str(getattr(exc.__cause__ or exc, "reason", None) or "")
            self.close("the server ended the TLS connection before answering"
                       + (f" ({alert})" if "ALERT" in alert else "") + CLOSED_AT_ONCE[True],
                       broken=True)
        else:
            self.close(f"{what} failed: {described(exc)}", broken=True)
