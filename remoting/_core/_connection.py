"""`Connection`: one stream, one decoder, one reader task, one writer task.

Theory of operation:
- The reader decodes frames and hands each command to the endpoint synchronously, so requests
  on one connection are pipelined. An async processor runs its first step right there; if it
  suspends, this task keeps it (a suspended coroutine belongs to its task) and a new reader
  task is started, so the requests behind it are not held up.
- Frames to send are appended to ``_out`` (sync, from the trio thread) and the writer task sends
  everything queued at once (write coalescing). A frame is ``bytes``, or (head, body) pieces
  from `encode_frame_parts` for a large body, which are never copied together: on plain TCP
  every queued piece goes out in one ``sendmsg`` (scatter/gather), over TLS large pieces go to
  ``send_all`` on their own and runs of small ones joined. Two shortcuts on plain TCP: the
  first frame after a read is sent directly (latency), and once ``FLUSH_FRAMES`` frames are
  queued they are sent at once with a non-blocking send, so that during a long burst of work
  (a read of many requests or responses) the peer gets the first results and works in
  parallel instead of waiting for the whole burst (both processes busy, not ping-pong).
- Every change to the outbound state (``_out``, ``_sending``, ``_raw``) happens under
  ``_write_lock``: `send_from_thread` lets a blocking caller's thread send an idle
  connection's next frame itself (`_thread_calls`).
- Receiving: the reader reads chunks with ``receive_some`` and feeds the decoder; on plain TCP,
  once the decoder knows the frame in progress still misses at least `RECEIVE_INTO_MIN_BYTES`,
  the reader receives the rest with ``recv_into`` straight into place
  (`FrameDecoder.get_buffer`), in a buffer borrowed from `_RECEIVE_BUFFERS` and given back
  once the frame is decoded.
- Back-pressure: when more than the high water mark is queued, `wait_writable` blocks senders
  until the writer has brought it under the low water mark, and a server's reader stops
  reading new requests (the peer is not draining its responses). A client's reader never
  stops: it reads responses, and pausing both sides would deadlock them.
- Any failure of the stream (or a codec error) closes the connection; the endpoint then fails
  all its pending requests at once (RocketMQ ``failFast``).
"""

from __future__ import annotations

import itertools
import socket
import threading
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import trio

from codec import LARGE_BODY_BYTES, CodecError, ForeignProtocolError, FrameDecoder
from processors import RequestContext

from .._log import log
from ._channel import ChannelHandle

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec import EncodedFrame

    from ._endpoint import Endpoint

__all__ = ["Connection"]

RECEIVE_BYTES = 256 * 1024
# Over TLS, pieces this big are sent as they are, never copied together (the size from which
# encode_frame_parts leaves a body apart, for the same measured reason).
LARGE_FRAME_BYTES = LARGE_BODY_BYTES
# A frame still missing this much is received in place (FrameDecoder.get_buffer); below it
# the usual chunked read costs no more, and reads whole runs of small frames at once.
RECEIVE_INTO_MIN_BYTES = 64 * 1024
_IOV_MAX = 1024  # buffers per sendmsg: Linux UIO_MAXIOV (POSIX guarantees only 16)
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)  # EPIPE as an error, never SIGPIPE
_HAS_SENDMSG = hasattr(socket.socket, "sendmsg")  # not on Windows
# Frames queued by one burst of work that are sent at once instead of after the burst: the peer
# starts on them while we go on (pipelined throughput ~1.7x, bench/rpc.py; docs/performance.md).
FLUSH_FRAMES = 16
_ids = itertools.count(1)


class _BufferPool:
    """Receive buffers for the rest of large frames, reused across frames and connections.

    Why: a fresh buffer of 1 MiB or more per frame is what glibc hands back to the kernel
    once it and the frame's body are both freed (heap trimming), so every frame page-faults
    all of it in again: about 1.2 ms of CPU per MiB measured here, against 35 us with a
    reused buffer (docs/performance.md). Thread-safe: blocking clients run loops in threads.
    """

    def __init__(self, max_kept_bytes: int) -> None:
        self.max_kept_bytes = max_kept_bytes
        self._free: list[bytearray] = []
        self._kept_bytes = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        """Return a buffer of at least ``size`` bytes (stale contents)."""
        with self._lock:
            for i, buf in enumerate(self._free):
                if len(buf) >= size:
                    del self._free[i]
                    self._kept_bytes -= len(buf)
                    return buf
        return bytearray(size)

    def give(self, buf: bytearray) -> None:
        """Keep ``buf`` for reuse if there is room; drop the smallest kept ones to make it."""
        with self._lock:
            free = self._free
            if len(buf) > self.max_kept_bytes:
                return
            free.sort(key=len)
            while free and self._kept_bytes + len(buf) > self.max_kept_bytes:
                if len(free[0]) >= len(buf):
                    return  # everything kept is bigger: keep those
                self._kept_bytes -= len(free.pop(0))
            free.append(buf)
            self._kept_bytes += len(buf)


# At most this much memory stays kept between frames, process-wide: one buffer for the
# largest default frame (RocketMQ's 16 MiB), or several for smaller ones received at once.
_RECEIVE_BUFFERS = _BufferPool(16 * 1024 * 1024)


class Connection:
    """A live connection to a peer, owned by an `Endpoint`."""

    def __init__(
        self, endpoint: Endpoint, stream: trio.abc.Stream, remote_addr: str,
        addr_key: str | None = None,
    ) -> None:
        cfg = endpoint.config
        self.id = next(_ids)
        self.endpoint = endpoint
        self.stream = stream
        # Write-through: a plain TCP socket can take a frame directly when nothing is queued,
        # saving the writer task's scheduling pass (latency). It is used once per wake-up by
        # incoming data (`_direct_budget`), so bursts still go through the coalescing writer.
        self._raw: socket.socket | None = None
        if isinstance(stream, trio.SocketStream) and _HAS_SENDMSG:
            self._raw = socket.socket(fileno=stream.socket.fileno())
            self._raw.settimeout(0.0)  # never block the loop, whatever the default timeout
        self._direct_budget = 1
        self.remote_addr = remote_addr
        self.addr_key = addr_key  # the "host:port" a client dialled, else None
        self.decoder = FrameDecoder(cfg.max_frame_bytes)
        self.high_water = cfg.write_buffer_high_water_mark
        # A server stops reading a peer that does not drain its responses. A client never
        # does: what it reads is mostly responses, which free the server's queue; were both
        # to pause, each would wait for the other for ever. (A client's own sends wait for
        # room instead, in wait_writable.)
        self.pause_reading = endpoint.role == "server"
        self.low_water = cfg.write_buffer_low_water_mark
        self.closed = False
        self.broken = False
        self.got_data = False
        self.processing = 0  # requests of this connection handed to processors
        self.max_processing = getattr(cfg, "max_requests_per_connection", 0)
        self.partial_frame_timeout = cfg.partial_frame_timeout
        self._processing_lot = trio.lowlevel.ParkingLot()
        self.close_reason: str | None = None
        self.last_activity = trio.current_time()
        self.channel = ChannelHandle(self)
        self.ctx = RequestContext(remote_addr=remote_addr, channel=self.channel)
        self.processed = partial(endpoint._processed, self)  # made once, used per request
        self._out: list[bytes | memoryview] = []  # the pieces of the queued frames
        self._out_bytes = 0
        self._out_frames = 0
        self.writes = 0  # writer passes and write-through sends
        self.frames_written = 0
        self._on_sent: list[Callable[[], None]] = []
        self._writer_lot = trio.lowlevel.ParkingLot()
        self._drain_lot = trio.lowlevel.ParkingLot()
        self._flush_lot = trio.lowlevel.ParkingLot()
        self._sending = False
        self._flush_blocked = False  # an early flush found the socket full; the writer resets it
        self._in_send = 0  # bytes of the write in progress: they count for back-pressure too
        self._scope: trio.CancelScope | None = None
        # Taken by every change to the outbound state (_out, _sending, _raw): the loop's
        # writes, and calls that send straight from a caller's thread (send_from_thread).
        self._write_lock = threading.Lock()
        self._nursery: trio.Nursery | None = None
        self.attributes: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<Connection #{self.id} {self.remote_addr}{' closed' if self.closed else ''}>"

    @property
    def is_active(self) -> bool:
        return not self.closed

    @property
    def queued_bytes(self) -> int:
        """Bytes queued for sending, or being sent, and not yet taken by the socket."""
        return self._out_bytes + self._in_send

    # ------------------------------------------------------------------ sending

    def write_frame(self, frame: EncodedFrame,
                    on_sent: Callable[[], None] | None = None) -> bool:
        """Queue ``frame`` for the writer (trio thread only); False if the connection is closed.

        ``frame`` is what `encode_frame_parts` returns: bytes, or (head, body) pieces sent one
        after the other without being copied together. ``on_sent`` runs once the frame was
        handed to the socket, or when the connection closes.
        """
        with self._write_lock:
            return self._write_frame(frame, on_sent)

    def _write_frame(self, frame: EncodedFrame, on_sent: Callable[[], None] | None) -> bool:
        if self.closed:
            return False
        if type(frame) is tuple:
            pieces: list[bytes | memoryview] | None = list(frame)
            size = len(frame[0]) + len(frame[1])
        else:
            pieces = None
            size = len(frame)
        if (self._direct_budget and self._raw is not None and not self._out
                and not self._sending):
            self._direct_budget = 0
            try:
                if pieces is None:
                    sent = self._raw.send(frame, _SEND_FLAGS)  # type: ignore[arg-type]
                else:
                    sent = self._raw.sendmsg(pieces, (), _SEND_FLAGS)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                sent = 0  # let the writer meet the error and close the connection
            if sent == size:
                self.writes += 1
                self.frames_written += 1
                self.last_activity = trio.current_time()
                if on_sent is not None:
                    on_sent()
                return True
            if sent:
                if pieces is None:
                    pieces = [frame]  # type: ignore[list-item]
                del pieces[: _consume(pieces, sent)]  # the rest of the frame, not copied
                size -= sent
        out = self._out
        if pieces is None:
            out.append(frame)  # type: ignore[arg-type]
        else:
            out += pieces
        self._out_bytes += size
        self._out_frames += 1
        if on_sent is not None:
            self._on_sent.append(on_sent)
        if (self._out_frames >= FLUSH_FRAMES and self._raw is not None and not self._sending
                and not self._flush_blocked):
            self._flush_now()
        elif self._writer_lot:
            self._writer_lot.unpark()
        return True

    def _flush_now(self) -> None:
        """Send what is queued at once, without waiting (the peer starts on it sooner)."""
        assert self._raw is not None
        out = self._out
        try:
            sent = self._raw.sendmsg(out[:_IOV_MAX], (), _SEND_FLAGS)  # no copy, as the writer
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            sent = 0  # let the writer meet the error and close the connection
        if sent == self._out_bytes:
            self.frames_written += self._out_frames
            self._out = []
            self._out_bytes = 0
            self._out_frames = 0
            on_sent, self._on_sent = self._on_sent, []
            for fn in on_sent:
                fn()
        else:
            del out[: _consume(out, sent)]  # the writer sends the rest
            self._out_bytes -= sent
            self._flush_blocked = True  # the socket is full: no more early flushes for now
            if self._writer_lot:
                self._writer_lot.unpark()
        if sent:
            self.writes += 1
            self.last_activity = trio.current_time()
            # the writer may now find nothing to send: wake whoever waits on what it sent
            if self._drain_lot and self._out_bytes <= self.low_water:
                self._drain_lot.unpark_all()
            if self._flush_lot and not self._out:
                self._flush_lot.unpark_all()

    def send_from_thread(self, frame: EncodedFrame, register: Callable[[], None]
                         ) -> Literal["sent", "queued"] | None:
        """Send ``frame`` from a thread other than the loop's, if nothing else is being sent.

        ``register()`` (the response table entry) runs first, under the write lock. Returns
        "sent", "queued" (the socket took part of it: the rest waits in the queue and the
        caller must have the loop call `kick_writer`), or None (nothing done: not possible now).
        A (head, body) frame goes out with one ``sendmsg``, never copied together.
        """
        with self._write_lock:
            raw = self._raw
            if raw is None or self.closed or self._out or self._sending:
                return None
            try:
                register()
            except ValueError:  # the same opaque is pending (one command sent twice at once)
                return None
            pieces: list[bytes | memoryview] | None = None
            try:
                if type(frame) is tuple:
                    pieces = list(frame)
                    sent = raw.sendmsg(pieces, (), _SEND_FLAGS)
                else:
                    sent = raw.send(frame, _SEND_FLAGS)  # type: ignore[arg-type]
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                sent = 0  # the writer meets the error and closes the connection
            clock = self.endpoint.clock
            if clock is not None:
                self.last_activity = clock.current_time()
            size = len(frame) if pieces is None else len(pieces[0]) + len(pieces[1])
            if sent:
                self.writes += 1
            if sent == size:
                self.frames_written += 1
                return "sent"
            if pieces is None:
                pieces = [frame]  # type: ignore[list-item]
            del pieces[: _consume(pieces, sent)]  # the rest, not copied
            self._out += pieces
            self._out_bytes += size - sent
            self._out_frames += 1
            return "queued"

    def send_response_from_thread(self, frame: EncodedFrame) -> bool:
        """Write a pool thread's response at once if the connection is idle (any thread but
        the loop's); True if it was written or queued, False if the loop must write it."""
        if self.closed:
            return False
        return self.send_from_thread(frame, _nothing) is not None

    def kick_writer(self) -> None:
        """Wake the writer for frames queued by `send_from_thread` (trio thread)."""
        if self._out and self._writer_lot:
            self._writer_lot.unpark()

    def write_response_frame(self, frame: EncodedFrame | None) -> None:
        """Queue a response frame produced by a processor (None means nothing to send)."""
        if frame is not None and not self.write_frame(frame):
            log.debug("response.dropped", conn_id=self.id, peer=self.remote_addr,
                      reason="connection closed")

    async def wait_writable(self) -> None:
        """Wait until the outbound queue is below the high water mark (or closed)."""
        while self._out_bytes + self._in_send > self.high_water and not self.closed:
            await self._drain_lot.park()

    async def wait_flushed(self) -> None:
        """Wait until everything queued so far reached the socket (or the connection closed)."""
        while (self._out or self._sending) and not self.closed:
            await self._flush_lot.park()

    async def _writer(self) -> None:
        stream = self.stream
        raw = self._raw
        while True:
            while not self._out:
                await self._writer_lot.park()
            with self._write_lock:
                out = self._out
                queued = self._out_bytes
                frames = self._out_frames
                self._out = []
                self._out_bytes = 0
                self._out_frames = 0
                # take the callbacks of exactly these frames (a fresh list for later ones)
                on_sent: list[Callable[[], None]] | tuple[()] = ()
                if self._on_sent:
                    on_sent, self._on_sent = self._on_sent, []
                self._sending = True
                self._in_send = queued
            try:
                if raw is not None:
                    await _send_buffers(raw, out)
                elif len(out) == 1:
                    await stream.send_all(out[0])
                elif queued < LARGE_FRAME_BYTES:
                    await stream.send_all(b"".join(out))  # one system call for many frames
                else:
                    await _send_pieces(stream, out)
            finally:
                with self._write_lock:
                    self._sending = False
                    self._in_send = 0
                    self._flush_blocked = False  # the socket took a whole pass again
                    self.writes += 1  # under the lock: caller threads count theirs too
                    self.frames_written += frames
                for fn in on_sent:  # sent, or never will be: either way the permit is free
                    fn()
            self.last_activity = trio.current_time()
            if self._drain_lot and self._out_bytes <= self.low_water:
                self._drain_lot.unpark_all()
            if self._flush_lot and not self._out:
                self._flush_lot.unpark_all()

    # ------------------------------------------------------------------ receiving

    def processing_done(self) -> None:
        """One of this connection's requests finished processing (trio thread)."""
        self.processing -= 1
        if self._processing_lot and self.processing < self.max_processing:
            self._processing_lot.unpark_all()

    async def _reader(self) -> None:
        stream = self.stream
        # plain TCP: the trio socket, to receive the rest of a large frame in place
        sock: trio.socket.SocketType | None = None
        if self._raw is not None:
            assert isinstance(stream, trio.SocketStream)
            sock = stream.socket
        decoder = self.decoder
        handle = self.endpoint.handle_command
        flush = self.endpoint.flush_dispatch
        limit = self.max_processing
        lent: bytearray | None = None  # the pool's buffer the decoder holds
        while True:
            # handle what is decodable, pausing while the peer has enough requests in progress
            suspended = None
            try:
                while True:
                    if limit and self.processing >= limit:
                        flush()
                        await self._processing_lot.park()
                        continue
                    cmd = decoder.next_command()
                    if cmd is None:
                        break
                    suspended = handle(self, cmd)
                    if suspended is not None:
                        break
            finally:
                if suspended is None:
                    flush()  # the requests of this read go to their pools together
            if suspended is not None:
                # An async processor suspended in this task, which now owns it and must finish
                # it (whatever happens here); a new task takes over reading (more of this read
                # may be buffered).
                try:
                    flush()
                    if lent is not None and not decoder.missing_bytes:
                        _RECEIVE_BUFFERS.give(lent)  # its frame was decoded: the new reader
                        # starts without one (a lent buffer only ever holds one frame's rest)
                    assert self._nursery is not None
                    self._nursery.start_soon(self._guard, self._reader, "read")
                finally:
                    await self.endpoint.finish_suspended(self, *suspended)
                return
            if lent is not None and not decoder.missing_bytes:
                _RECEIVE_BUFFERS.give(lent)  # its frame was decoded just above
                lent = None
            if self._out_bytes + self._in_send > self.high_water and self.pause_reading:
                await self.wait_writable()
            # the rest of a large frame goes straight into place (plain TCP only)
            into = None
            if lent is not None:
                into = decoder.get_buffer()
            elif sock is not None and decoder.missing_bytes >= RECEIVE_INTO_MIN_BYTES:
                lent = _RECEIVE_BUFFERS.take(decoder.missing_bytes)
                into = decoder.get_buffer(lent)
            data: bytes | bytearray | int = b""
            if decoder.buffered_bytes and self.partial_frame_timeout:
                with trio.move_on_after(self.partial_frame_timeout):
                    if into is None:
                        data = await stream.receive_some(RECEIVE_BYTES)
                    else:
                        assert sock is not None
                        data = await sock.recv_into(into)
                    if not data:
                        self.close("peer closed the connection mid-frame")
                        return
                if not data:
                    log.warning("connection.stalled", conn_id=self.id, peer=self.remote_addr,
                                buffered_bytes=decoder.buffered_bytes,
                                timeout=self.partial_frame_timeout)
                    self.close(f"partial frame stalled for {self.partial_frame_timeout}s")
                    return
            elif into is None:
                data = await stream.receive_some(RECEIVE_BYTES)
            else:
                assert sock is not None
                data = await sock.recv_into(into)
            if not data:
                if not self.got_data and self.endpoint.role == "client":
                    self.close("peer closed the connection without answering "
                               "(does the server require TLS? see ClientConfig.use_tls)")
                else:
                    self.close("peer closed the connection")
                return
            self.got_data = True
            self._direct_budget = 1
            self.last_activity = trio.current_time()
            if into is None:
                decoder.feed(data)  # type: ignore[arg-type]
            else:
                decoder.buffer_updated(data)  # type: ignore[arg-type]
                into = None

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Serve the connection until it closes; the endpoint is told in every case."""
        bound = log.bind(conn_id=self.id, peer=self.remote_addr, role=self.endpoint.role)
        try:
            if not self.closed:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self._scope = nursery.cancel_scope
                    if self.closed:  # closed between creation and start
                        nursery.cancel_scope.cancel()
                    nursery.start_soon(self._guard, self._writer, "write")
                    await self._guard(self._reader, "read")
        finally:
            self.closed = True
            self._writer_lot.unpark_all()
            self._drain_lot.unpark_all()
            self._flush_lot.unpark_all()
            with self._write_lock:  # never while a caller's thread sends (send_from_thread)
                on_sent, self._on_sent, self._out = self._on_sent, [], []
                self._out_bytes = self._out_frames = 0
                if self._raw is not None:
                    self._raw.detach()  # the fd belongs to the trio socket, closed just below
                    self._raw = None
            for fn in on_sent:
                fn()
            with trio.CancelScope(shield=True):
                try:
                    await self.stream.aclose()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
            self.endpoint.connection_closed(self, self.broken)
            bound.info("connection.closed", reason=self.close_reason or "shut down")

    async def _guard(self, fn: Callable[[], Any], what: str) -> None:
        try:
            await fn()
        except ForeignProtocolError as exc:
            log.warning("connection.broken", conn_id=self.id, peer=self.remote_addr,
                        protocol=exc.protocol, error=str(exc))
            self.broken = True
            self.close(f"not our protocol: {exc.protocol}")
        except CodecError as exc:
            log.warning("connection.broken", conn_id=self.id, peer=self.remote_addr,
                        error=str(exc))
            self.broken = True
            self.close(f"codec error: {exc}")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            if not self.closed:
                self.broken = True
                log.info("connection.broken", conn_id=self.id, peer=self.remote_addr,
                         during=what, error=repr(exc))
            self.close(f"{what} failed: {exc!r}")
        except Exception as exc:  # a bug (ours or a hook's): lose this connection, not all
            self.broken = True
            log.error("connection.failed", conn_id=self.id, peer=self.remote_addr,
                      during=what, exc_info=True)
            self.close(f"{what} failed: {exc!r}")

    def close(self, reason: str = "closed locally") -> None:
        """Close the connection (idempotent, sync); pending requests fail right after."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        if self._scope is not None:
            self._scope.cancel()
        self._writer_lot.unpark_all()
        self._drain_lot.unpark_all()


async def _send_buffers(raw: socket.socket, out: list[bytes | memoryview]) -> None:
    """Send ``out`` on a plain TCP socket with ``sendmsg``: no copy, partial sends resumed.

    Raises:
        OSError: the socket failed; what was sent of ``out`` is unknown, the stream broken.
        trio.Cancelled: as for ``send_all``: part of ``out`` may have been sent.
    """
    await trio.lowlevel.checkpoint_if_cancelled()  # as trio's send_all: nothing after a cancel
    first = 0
    while True:
        try:
            sent = raw.sendmsg(out[first : first + _IOV_MAX] if first or len(out) > _IOV_MAX
                               else out, (), _SEND_FLAGS)
        except (BlockingIOError, InterruptedError):
            await trio.lowlevel.wait_writable(raw)
            continue
        first = _consume(out, sent, first)
        if first == len(out):
            return


def _nothing() -> None:
    """Nothing to register before a response is sent."""


def _consume(pieces: list[bytes | memoryview], sent: int, first: int = 0) -> int:
    """Drop ``sent`` bytes from ``pieces[first:]``; return the index of the first piece left.

    A piece sent in part is replaced by a memoryview of its rest (no copy).
    """
    while sent:
        size = len(pieces[first])
        if sent < size:
            pieces[first] = memoryview(pieces[first])[sent:]
            return first
        sent -= size
        first += 1
    return first


async def _send_pieces(stream: trio.abc.Stream, out: list[bytes | memoryview]) -> None:
    """Send ``out`` (TLS) joining runs of small pieces, but each large one on its own (no copy)."""
    small: list[bytes | memoryview] = []
    for piece in out:
        if len(piece) < LARGE_FRAME_BYTES:
            small.append(piece)
            continue
        if small:
            await stream.send_all(b"".join(small))
            small = []
        await stream.send_all(piece)
    if small:
        await stream.send_all(b"".join(small))
