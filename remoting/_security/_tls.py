"""TLS with `trio.SSLStream` (SPEC 8): contexts, the client handshake, and the server's mode.

Permissive mode tells TLS from plaintext by peeking (MSG_PEEK) at the first byte of a new
connection: 0x16 is a TLS handshake record. Nothing is consumed, so a plaintext peer's first
frame is read normally.
"""

from __future__ import annotations

import os
import socket
import ssl
from typing import TYPE_CHECKING, Final, TypeVar

import trio

from .._errors import RemotingStartError

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._config import ClientConfig, ServerConfig

__all__ = ["client_context", "server_context", "tls_client_stream", "tls_server_stream"]

TLS_HANDSHAKE_RECORD: Final = 0x16
T = TypeVar("T")


def server_context(config: ServerConfig) -> ssl.SSLContext | None:
    """Build the server's context, or None when TLS is disabled.

    Raises:
        ValueError: TLS is on but the certificate or key file is not configured.
        RemotingStartError: a certificate, key or CA file cannot be read or is not PEM.
    """
    if config.tls_mode == "disabled":
        return None
    if not config.tls_cert_file or not config.tls_key_file:
        raise ValueError(
            f"tls_mode={config.tls_mode!r} needs tls_cert_file and tls_key_file"
        )
    cert, key, ca = config.tls_cert_file, config.tls_key_file, config.tls_ca_file
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load("tls_cert_file / tls_key_file", (cert, key), lambda: ctx.load_cert_chain(cert, key))
    if ca:
        _load("tls_ca_file", (ca,), lambda: ctx.load_verify_locations(ca))
        ctx.verify_mode = ssl.CERT_REQUIRED  # mutual TLS
    return ctx


def client_context(config: ClientConfig) -> ssl.SSLContext | None:
    """Build the client's context, or None when ``use_tls`` is off.

    Raises:
        ValueError: a key file without a certificate file.
        RemotingStartError: a certificate, key or CA file cannot be read or is not PEM.
    """
    if not config.use_tls:
        return None
    cert, key, ca = config.tls_cert_file, config.tls_key_file, config.tls_ca_file
    if key and not cert:  # it was ignored: the client connected without a certificate
        raise ValueError("tls_key_file needs tls_cert_file (the client certificate)")
    # With a CA file, only that CA is trusted (not the system's as well).
    ctx = _load("tls_ca_file", (ca,), lambda: ssl.create_default_context(cafile=ca))
    ctx.check_hostname = config.tls_check_hostname
    if cert:
        option = "tls_cert_file / tls_key_file" if key else (
            "tls_cert_file (no tls_key_file: the key must then be in the same file)")
        _load(option, (cert, key), lambda: ctx.load_cert_chain(cert, key))
    return ctx


def _load(option: str, files: tuple[str | None, ...], load: Callable[[], T]) -> T:
    """Return ``load()``; turn its bare OS or OpenSSL error into one that names the files
    (the one missing, when one is). The address is not the problem: the error has none."""
    try:
        return load()
    except OSError as exc:  # FileNotFoundError does not name the file here; ssl.SSLError
        missing = [f for f in files if f and not os.path.exists(f)]
        if isinstance(exc, FileNotFoundError) and missing:
            named = ", ".join(repr(f) for f in missing)
            reason = f"{option} {named}: No such file or directory; check the path"
        else:
            named = ", ".join(repr(f) for f in files if f)
            why = (f"not PEM, or the key does not match the certificate ({exc.reason or exc})"
                   if isinstance(exc, ssl.SSLError) else exc.strerror or str(exc))
            reason = f"cannot load {option} {named}: {why}; check the path and the contents"
        raise RemotingStartError(None, reason) from exc


async def tls_client_stream(stream: trio.SocketStream, ctx: ssl.SSLContext, host: str,
                            config: ClientConfig) -> trio.SSLStream[trio.SocketStream]:
    """Wrap ``stream`` and complete the handshake (inside the connect timeout).

    Raises:
        ssl.SSLError, trio.BrokenResourceError, OSError: the handshake failed (certificate,
            protocol, or a plaintext peer); the socket is closed. The caller maps these.
    """
    tls = trio.SSLStream(stream, ctx, server_hostname=config.tls_server_hostname or host)
    try:
        await tls.do_handshake()
    except BaseException:  # a failure, the connect timeout or shutdown: close the socket
        with trio.CancelScope(shield=True):
            await stream.aclose()
        raise
    return tls


async def tls_server_stream(stream: trio.SocketStream, ctx: ssl.SSLContext | None,
                            mode: str) -> trio.abc.Stream | None:
    """Apply the server's TLS mode to a new connection; None means close it.

    Returns the stream to serve: plaintext, or TLS after a completed handshake.
    """
    if ctx is None:
        return stream
    if mode == "permissive":
        try:
            first = await stream.socket.recv(1, socket.MSG_PEEK)
        except OSError:  # reset before its first byte (a health check closing with RST)
            return None
        if not first or first[0] != TLS_HANDSHAKE_RECORD:
            return stream
    tls = trio.SSLStream(stream, ctx, server_side=True)
    try:
        await tls.do_handshake()
    except (trio.BrokenResourceError, ssl.SSLError, OSError):
        return None
    return tls
