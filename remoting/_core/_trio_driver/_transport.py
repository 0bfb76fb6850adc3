"""Byte transports under a `Connection`: the one place that sends and receives raw bytes.

- `SocketTransport` (plain TCP) drives the non-blocking socket itself with trio's
  ``wait_readable`` / ``wait_writable``: a read is one wait and one ``recv`` (no retry, no
  wrapper layers), a send is ``sendmsg`` of the queued pieces (scatter/gather, no copy), and
  `send_now` tries one non-blocking ``sendmsg`` without waiting, so a connection can hand a
  frame to the kernel in the same step that produced it.
- `StreamTransport` wraps any trio stream (TLS): no send without awaiting, so `send_now`
  sends nothing; large pieces go to ``send_all`` on their own, runs of small ones joined.

The loop thread uses a transport through its connection's tasks; one other thread may too:
a processor pool's thread sending its lone reply calls `SocketTransport.send_now`, under the
sender's gate (`Sender.send_from_thread`), so one thread at a time touches the socket. A
transport never closes the connection itself: errors propagate to the connection, which
closes.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Final

import trio

from codec import LARGE_BODY_BYTES

from .._sansio._outbound import consume

if TYPE_CHECKING:
    from .._sansio._outbound import Piece

__all__ = ["SocketTransport", "StreamTransport", "Transport", "transport_for"]

IOV_MAX: Final = 1024  # buffers per sendmsg: Linux UIO_MAXIOV (POSIX guarantees only 16)
# Over TLS, pieces this big are sent as they are, never copied together (the size from which
# encode_frame_parts leaves a body apart, for the same measured reason).
LARGE_PIECE_BYTES: Final = LARGE_BODY_BYTES
_SEND_FLAGS: Final = getattr(socket, "MSG_NOSIGNAL", 0)  # EPIPE as an error, never SIGPIPE
_wait_readable = trio.lowlevel.wait_readable
_wait_writable = trio.lowlevel.wait_writable


class SocketTransport:
    """A plain TCP connection: the socket driven directly on the loop thread."""

    can_send_now = True
    receives_into = True
    tls_version: str | None = None

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream  # owns the file descriptor; closes it (with notify_closing)
        # A stdlib socket on the same descriptor: its calls skip trio's wrapper layers.
        self._sock = socket.socket(fileno=stream.socket.fileno())
        self._sock.settimeout(0.0)
        self._recv = self._sock.recv
        self._recv_into = self._sock.recv_into
        self._sendmsg = self._sock.sendmsg

    def send_now(self, pieces: list[Piece]) -> int:
        """Send what the socket takes at once (no wait); return the byte count (0: full).

        Raises:
            OSError: the connection is broken.
        """
        try:
            return self._sendmsg(pieces if len(pieces) <= IOV_MAX else pieces[:IOV_MAX],
                                 (), _SEND_FLAGS)
        except (BlockingIOError, InterruptedError):
            return 0

    async def send_all(self, pieces: list[Piece]) -> None:
        """Send every piece, waiting for room as needed.

        Raises:
            OSError: the connection is broken; what was sent is unknown.
            trio.Cancelled: part of ``pieces`` may have been sent.
        """
        await trio.lowlevel.checkpoint_if_cancelled()  # as trio's send_all: nothing after a cancel
        while pieces:
            sent = self.send_now(pieces)
            if sent:
                pieces = consume(pieces, sent)
            else:
                await _wait_writable(self._sock)

    async def receive(self, max_bytes: int) -> bytes:
        """Wait for data and return up to ``max_bytes`` of it; ``b""`` at end of stream.

        Waiting first (instead of trying first) costs one readiness wait per read and no
        failed ``recv``, and is the read's one checkpoint, so a busy peer never starves the loop.
        """
        while True:
            await _wait_readable(self._sock)
            try:
                return self._recv(max_bytes)
            except (BlockingIOError, InterruptedError):
                continue

    async def receive_into(self, buffer: memoryview) -> int:
        """Wait for data and write it at the start of ``buffer``; return the count (0: EOF)."""
        while True:
            await _wait_readable(self._sock)
            try:
                return self._recv_into(buffer)
            except (BlockingIOError, InterruptedError):
                continue

    async def aclose(self) -> None:
        """Close the connection (the stream closes the descriptor and wakes its waiters)."""
        self._sock.detach()  # the descriptor belongs to the stream
        await self._stream.aclose()


class StreamTransport:
    """Any trio stream (TLS over TCP): every send awaits the stream."""

    can_send_now = False
    receives_into = False

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self.tls_version: str | None = None
        if isinstance(stream, trio.SSLStream):
            self.tls_version = stream.version()

    def send_now(self, pieces: list[Piece]) -> int:
        """Nothing can be sent without awaiting the stream."""
        return 0

    async def send_all(self, pieces: list[Piece]) -> None:
        """Send ``pieces``: runs of small ones joined (one TLS record batch), large ones alone.

        Raises:
            trio.BrokenResourceError, trio.ClosedResourceError, OSError: the stream failed.
        """
        send = self._stream.send_all
        small: list[Piece] = []
        for piece in pieces:
            if len(piece) < LARGE_PIECE_BYTES:
                small.append(piece)
                continue
            if small:
                await send(b"".join(small))
                small = []
            await send(piece)
        if small:
            await send(small[0] if len(small) == 1 else b"".join(small))

    async def receive(self, max_bytes: int) -> bytes | bytearray:
        """Return up to ``max_bytes`` (``b""`` at end of stream)."""
        return await self._stream.receive_some(max_bytes)

    async def receive_into(self, buffer: memoryview) -> int:
        """Not supported: callers check `receives_into` first."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the stream."""
        await self._stream.aclose()


Transport = SocketTransport | StreamTransport


def transport_for(stream: trio.abc.Stream) -> Transport:
    """Return the fastest transport for ``stream``: direct socket I/O for plain TCP."""
    if isinstance(stream, trio.SocketStream) and hasattr(socket.socket, "sendmsg"):
        return SocketTransport(stream)
    return StreamTransport(stream)
