"""Byte I/O under a `ThreadConnection`: the one place the thread driver touches raw sockets.

Every socket here is non-blocking: a read or a send is one attempt that never waits, and the
connection waits for readiness itself (``select.poll``), so the thread that waits chooses how
long (its own deadline) and a shutdown of the socket wakes it.

- `SocketIO`: plain TCP. `send_now` is one ``sendmsg`` of the queued pieces (no copy of large
  bodies); `recv` / `recv_into` one ``recv``.
- `TLSIO`: TLS through `ssl.SSLObject` over memory buffers (sans-I/O TLS): bytes are
  encrypted and decrypted in memory, under a lock (an SSL object must not be used by two
  threads at once; a reader and a sender may be different threads), and the raw bytes go
  through the socket as for plain TCP. Decrypted bytes can be waiting in memory with nothing
  to read on the socket (`buffered`), and encrypted bytes can wait to be sent
  (`wants_write`).
- `dial` connects (the call's deadline and ``connect_timeout``, whichever comes first);
  `TLSIO.handshake` completes the TLS handshake within a deadline.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from time import monotonic
from typing import TYPE_CHECKING, Final

from ..._security._tls import certificate_subject
from .._sansio._outbound import consume

if TYPE_CHECKING:
    from .._sansio._outbound import Piece

__all__ = ["IO", "SocketIO", "TLSIO", "dial", "wait_for"]

IOV_MAX: Final = 1024  # buffers per sendmsg: Linux UIO_MAXIOV (POSIX guarantees only 16)
_SEND_FLAGS: Final = getattr(socket, "MSG_NOSIGNAL", 0)  # EPIPE as an error, never SIGPIPE
# Encrypted bytes a TLS connection holds for the socket before it takes no more plaintext:
# beyond, what waits is counted in the connection's queue (back-pressure stays visible).
TLS_RAW_LIMIT: Final = 256 * 1024
TLS_RECEIVE_BYTES: Final = 64 * 1024
_WOULD_BLOCK: Final = (BlockingIOError, InterruptedError)


POLL_MAX_MS: Final = 2**31 - 1  # poll's timeout is a C int of milliseconds (~24.8 days)
# A socket timeout fits a C timeval; longer is "until the call's deadline" all the same.
SOCKET_TIMEOUT_MAX: Final = 1e6


def poll_ms(seconds: float) -> int:
    """Return ``seconds`` as a poll timeout in whole milliseconds, rounded up (0 or more;
    an infinite wait is the longest poll takes, and the caller polls again)."""
    if seconds <= 0:
        return 0
    if seconds >= POLL_MAX_MS / 1000:
        return POLL_MAX_MS
    return int(seconds * 1000) + 1


def wait_for(sock: socket.socket, events: int, deadline: float) -> bool:
    """Wait until ``sock`` is ready for ``events`` or ``deadline`` (`time.monotonic`);
    True if ready (a one-off wait: connects and handshakes)."""
    poller = select.poll()
    poller.register(sock, events)
    while True:
        if poller.poll(poll_ms(deadline - monotonic())):
            return True
        if monotonic() >= deadline:
            return False


def dial(host: str, port: int, deadline: float) -> socket.socket:
    """Connect to ``host:port`` before ``deadline``; return the non-blocking socket, with
    TCP_NODELAY (small frames leave at once, as trio's ``open_tcp_stream`` sets it).

    Raises:
        OSError: the connect failed (``TimeoutError``: out of time).
    """
    timeout = min(max(deadline - monotonic(), 0.001), SOCKET_TIMEOUT_MAX)
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class SocketIO:
    """A plain TCP connection's bytes (non-blocking)."""

    receives_into = True
    tls_version: str | None = None
    peer_certificate_subject: str | None = None

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._recv = sock.recv
        self._recv_into = sock.recv_into
        self._sendmsg = sock.sendmsg

    def buffered(self) -> bool:
        """Bytes are ready without reading the socket (never, for plain TCP)."""
        return False

    def wants_write(self) -> bool:
        """Bytes wait to be sent below the connection's queue (never, for plain TCP)."""
        return False

    def recv(self, max_bytes: int) -> bytes | None:
        """Return up to ``max_bytes`` now; ``b""`` at end of stream, None if none are there.

        Raises:
            OSError: the connection is broken.
        """
        try:
            return self._recv(max_bytes)
        except _WOULD_BLOCK:
            return None

    def recv_into(self, buffer: memoryview) -> int | None:
        """Write what is there at the start of ``buffer``; the count (0: end of stream), or
        None if nothing is there."""
        try:
            return self._recv_into(buffer)
        except _WOULD_BLOCK:
            return None

    def send_now(self, pieces: list[Piece]) -> int:
        """Send what the socket takes at once; return the byte count (0: full).

        Raises:
            OSError: the connection is broken.
        """
        try:
            return self._sendmsg(pieces if len(pieces) <= IOV_MAX else pieces[:IOV_MAX], (),
                                 _SEND_FLAGS)
        except _WOULD_BLOCK:
            return 0

    def flush(self) -> None:
        """Send what waits below the queue (nothing, for plain TCP)."""

    def shutdown(self) -> None:
        """Stop both directions: a thread waiting to read wakes and reads the end."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Release the socket (only once no thread uses it any more)."""
        self.sock.close()


class TLSIO(SocketIO):
    """A TLS connection's bytes: `ssl.SSLObject` over memory buffers (see the module
    docstring); everything that touches the SSL object holds ``_lock``."""

    receives_into = False

    def __init__(self, sock: socket.socket, tls: ssl.SSLObject, incoming: ssl.MemoryBIO,
                 outgoing: ssl.MemoryBIO) -> None:
        super().__init__(sock)
        self._tls = tls
        self._in = incoming
        self._out = outgoing
        self._raw: list[Piece] = []  # encrypted bytes the socket has not taken yet
        self._lock = threading.Lock()
        self.tls_version = tls.version()
        # the verified certificate's subject (RFC 4514), None if not verified
        self.peer_certificate_subject = certificate_subject(tls.getpeercert())

    @classmethod
    def handshake(cls, sock: socket.socket, context: ssl.SSLContext, server_hostname: str,
                  deadline: float) -> TLSIO:
        """Complete a client handshake on ``sock`` before ``deadline``.

        Raises:
            ssl.SSLError: the handshake failed (certificate, protocol, a plaintext peer).
            TimeoutError: out of time.
            OSError: the connection broke.
        """
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
        while True:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                _send_all(sock, outgoing.read(), deadline)
                if not wait_for(sock, select.POLLIN, deadline):
                    raise TimeoutError("TLS handshake timed out") from None
                data = sock.recv(TLS_RECEIVE_BYTES)
                if data:
                    incoming.write(data)
                else:
                    incoming.write_eof()
                continue
            break
        _send_all(sock, outgoing.read(), deadline)
        return cls(sock, tls, incoming, outgoing)

    def buffered(self) -> bool:
        """Decrypted or received bytes are waiting in memory."""
        return self._tls.pending() > 0 or self._in.pending > 0

    def wants_write(self) -> bool:
        """Encrypted bytes wait for the socket."""
        return bool(self._raw) or self._out.pending > 0

    def recv(self, max_bytes: int) -> bytes | None:
        """Return up to ``max_bytes`` of plaintext now (``b""``: end of stream; None: none)."""
        with self._lock:
            while True:
                try:
                    return self._tls.read(max_bytes)
                except ssl.SSLWantReadError:
                    pass
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    return b""
                try:
                    data = self.sock.recv(TLS_RECEIVE_BYTES)
                except _WOULD_BLOCK:
                    return None
                if not data:
                    self._in.write_eof()
                else:
                    self._in.write(data)

    def recv_into(self, buffer: memoryview) -> int | None:
        """Not supported: callers check `receives_into` first."""
        raise NotImplementedError

    def send_now(self, pieces: list[Piece]) -> int:
        """Encrypt what the raw buffer has room for and send what the socket takes; return
        the plaintext bytes taken (0: the raw buffer is full)."""
        with self._lock:
            if sum(len(p) for p in self._raw) + self._out.pending >= TLS_RAW_LIMIT:
                self._send_raw()
                return 0
            taken = 0
            for piece in pieces:
                taken += self._tls.write(piece)
            self._send_raw()
            return taken

    def flush(self) -> None:
        """Send what the socket takes of the encrypted bytes waiting."""
        with self._lock:
            self._send_raw()

    def _send_raw(self) -> None:
        if self._out.pending:
            self._raw.append(self._out.read())
        if not self._raw:
            return
        try:
            sent = self._sendmsg(self._raw[:IOV_MAX], (), _SEND_FLAGS)
        except _WOULD_BLOCK:
            return
        self._raw = consume(self._raw, sent)


def _send_all(sock: socket.socket, data: bytes, deadline: float) -> None:
    """Send ``data`` on the non-blocking ``sock`` before ``deadline`` (handshakes only)."""
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view):]
        except _WOULD_BLOCK:
            if not wait_for(sock, select.POLLOUT, deadline):
                raise TimeoutError("TLS handshake timed out") from None


IO = SocketIO | TLSIO
