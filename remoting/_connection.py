"""`Connection`: one stream, one decoder, one reader task, one writer task.

Theory of operation:
- The reader decodes frames and hands each command to the endpoint synchronously, so requests
  on one connection are pipelined. An async processor runs its first step right there; if it
  suspends, this task keeps it (a suspended coroutine belongs to its task) and a new reader
  task is started, so the requests behind it are not held up.
- Frames to send are appended to ``_out`` (sync, from the trio thread) and the writer task sends
  everything queued in one ``send_all`` (write coalescing). Two shortcuts on plain TCP: the
  first frame after a read is sent directly (latency), and once ``FLUSH_FRAMES`` frames are
  queued they are sent at once with a non-blocking send, so that during a long burst of work
  (a read of many requests or responses) the peer gets the first results and works in
  parallel instead of waiting for the whole burst (both processes busy, not ping-pong).
- Back-pressure: when more than the high water mark is queued, `wait_writable` blocks senders
  until the writer has brought it under the low water mark, and the reader stops reading new
  requests (the peer is not draining its responses).
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

from codec import CodecError, ForeignProtocolError, FrameDecoder
from processors import RequestContext

from ._channel import ChannelHandle
from ._log import log

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._endpoint import Endpoint

__all__ = ["Connection"]

RECEIVE_BYTES = 256 * 1024
LARGE_FRAME_BYTES = 256 * 1024  # frames this big are sent as they are, never copied together
# Frames queued by one burst of work that are sent at once instead of after the burst: the peer
# starts on them while we go on (pipelined throughput ~1.7x, bench/rpc.py; docs/performance.md).
FLUSH_FRAMES = 16
_ids = itertools.count(1)


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
        if isinstance(stream, trio.SocketStream):
            self._raw = socket.socket(fileno=stream.socket.fileno())
            self._raw.settimeout(0.0)  # never block the loop, whatever the default timeout
        self._direct_budget = 1
        self.remote_addr = remote_addr
        self.addr_key = addr_key  # the "host:port" a client dialled, else None
        self.decoder = FrameDecoder(cfg.max_frame_bytes)
        self.high_water = cfg.write_buffer_high_water_mark
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
        self._out: list[bytes] = []
        self._out_bytes = 0
        self.writes = 0  # send_all calls
        self.frames_written = 0
        self._on_sent: list[Callable[[], None]] = []
        self._writer_lot = trio.lowlevel.ParkingLot()
        self._drain_lot = trio.lowlevel.ParkingLot()
        self._flush_lot = trio.lowlevel.ParkingLot()
        self._sending = False
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

    def write_frame(self, frame: bytes, on_sent: Callable[[], None] | None = None) -> bool:
        """Queue ``frame`` for the writer (trio thread only); False if the connection is closed.

        ``on_sent`` runs once the frame was handed to the socket, or when the connection closes.
        """
        with self._write_lock:
            return self._write_frame(frame, on_sent)

    def _write_frame(self, frame: bytes, on_sent: Callable[[], None] | None) -> bool:
        if self.closed:
            return False
        if (self._direct_budget and self._raw is not None and not self._out
                and not self._sending):
            self._direct_budget = 0
            try:
                sent = self._raw.send(frame)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                sent = 0  # let the writer meet the error and close the connection
            if sent == len(frame):
                self.writes += 1
                self.frames_written += 1
                self.last_activity = trio.current_time()
                if on_sent is not None:
                    on_sent()
                return True
            if sent:
                frame = memoryview(frame)[sent:]  # type: ignore[assignment]  # no copy
        out = self._out
        out.append(frame)
        self._out_bytes += len(frame)
        if on_sent is not None:
            self._on_sent.append(on_sent)
        if len(out) >= FLUSH_FRAMES and self._raw is not None and not self._sending:
            self._flush_now()
        elif self._writer_lot:
            self._writer_lot.unpark()
        return True

    def _flush_now(self) -> None:
        """Send what is queued at once, without waiting (the peer starts on it sooner)."""
        assert self._raw is not None
        data = b"".join(self._out)
        try:
            sent = self._raw.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            sent = 0  # let the writer meet the error and close the connection
        if sent == len(data):
            self.frames_written += len(self._out)
            self._out = []
            self._out_bytes = 0
            on_sent, self._on_sent = self._on_sent, []
            for fn in on_sent:
                fn()
        else:
            self._out = [memoryview(data)[sent:]]  # type: ignore[list-item]
            self._out_bytes = len(data) - sent
            if self._writer_lot:
                self._writer_lot.unpark()
        if sent:
            self.writes += 1
            self.last_activity = trio.current_time()

    def send_from_thread(self, frame: bytes, register: Callable[[], None]
                         ) -> Literal["sent", "queued"] | None:
        """Send ``frame`` from a thread other than the loop's, if nothing else is being sent.

        ``register()`` (the response table entry) runs first, under the write lock. Returns
        "sent", "queued" (the socket took part of it: the rest waits in the queue and the
        caller must have the loop call `kick_writer`), or None (nothing done: not possible now).
        """
        with self._write_lock:
            raw = self._raw
            if raw is None or self.closed or self._out or self._sending:
                return None
            try:
                register()
            except ValueError:  # the same opaque is pending (one command sent twice at once)
                return None
            try:
                sent = raw.send(frame)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                sent = 0  # the writer meets the error and closes the connection
            clock = self.endpoint.clock
            if clock is not None:
                self.last_activity = clock.current_time()
            if sent == len(frame):
                return "sent"
            rest = memoryview(frame)[sent:]
            self._out.append(rest)  # type: ignore[arg-type]
            self._out_bytes += len(rest)
            return "queued"

    def kick_writer(self) -> None:
        """Wake the writer for frames queued by `send_from_thread` (trio thread)."""
        if self._out and self._writer_lot:
            self._writer_lot.unpark()

    def write_response_frame(self, frame: bytes | None) -> None:
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
        while True:
            while not self._out:
                await self._writer_lot.park()
            with self._write_lock:
                out = self._out
                queued = self._out_bytes
                self._out = []
                self._out_bytes = 0
                # take the callbacks of exactly these frames (a fresh list for later ones)
                on_sent: list[Callable[[], None]] | tuple[()] = ()
                if self._on_sent:
                    on_sent, self._on_sent = self._on_sent, []
                self._sending = True
                self._in_send = queued
            try:
                if len(out) == 1:
                    await stream.send_all(out[0])
                elif queued < LARGE_FRAME_BYTES:
                    await stream.send_all(b"".join(out))  # one system call for many frames
                else:
                    await _send_pieces(stream, out)
            finally:
                with self._write_lock:
                    self._sending = False
                    self._in_send = 0
                for fn in on_sent:  # sent, or never will be: either way the permit is free
                    fn()
            self.writes += 1
            self.frames_written += len(out)
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
        decoder = self.decoder
        handle = self.endpoint.handle_command
        flush = self.endpoint.flush_dispatch
        limit = self.max_processing
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
                flush()  # the requests of this read go to their pools together
            if suspended is not None:
                # An async processor suspended in this task, which now owns it and must finish
                # it; a new task takes over reading (more of this read may be buffered).
                assert self._nursery is not None
                self._nursery.start_soon(self._guard, self._reader, "read")
                await self.endpoint.finish_suspended(self, *suspended)
                return
            if self._out_bytes + self._in_send > self.high_water:
                await self.wait_writable()
            data: bytes | bytearray = b""
            if decoder.buffered_bytes and self.partial_frame_timeout:
                with trio.move_on_after(self.partial_frame_timeout):
                    data = await stream.receive_some(RECEIVE_BYTES)
                    if not data:
                        self.close("peer closed the connection mid-frame")
                        return
                if not data:
                    log.warning("connection.stalled", conn_id=self.id, peer=self.remote_addr,
                                buffered_bytes=decoder.buffered_bytes,
                                timeout=self.partial_frame_timeout)
                    self.close(f"partial frame stalled for {self.partial_frame_timeout}s")
                    return
            else:
                data = await stream.receive_some(RECEIVE_BYTES)
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
            decoder.feed(data)

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
            on_sent, self._on_sent, self._out = self._on_sent, [], []
            for fn in on_sent:
                fn()
            with self._write_lock:  # never while a caller's thread sends (send_from_thread)
                if self._raw is not None:
                    self._raw.detach()  # the fd belongs to the trio socket, closed just below
                    self._raw = None
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


async def _send_pieces(stream: trio.abc.Stream, out: list[bytes]) -> None:
    """Send ``out`` joining runs of small frames, but each large frame on its own (no copy)."""
    small: list[bytes] = []
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
